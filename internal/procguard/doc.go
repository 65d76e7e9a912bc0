// Package procguard makes what a process leaves behind die with it, however
// it dies: a SIGKILL, the OOM killer or a crash included, which no deferred
// cleanup and no signal handler survives.
//
// Start starts a guardian: this very executable again (Main dispatches
// it), in a process group of its own, so that signals sent to its parent's
// group (a terminal's Ctrl-C, `timeout -s KILL`, which signals its whole
// group) do not reach it. The guardian holds the read end of a pipe whose
// write end only the parent holds. When the parent ends, for any reason,
// the kernel closes that end, the guardian reads end-of-file, and it
// SIGKILLs the process group of the job it runs (Guardian.Run) and removes
// the paths it was given (Guardian.Remove). A parent that cleaned up by
// itself disarms it (Guardian.Close). A parent that is stopped rather
// than dead (Ctrl-Z, SIGSTOP) gives no end-of-file: it sets a deadline
// (Guardian.Deadline), and moves it while it runs, past which the guardian
// SIGKILLs the group all the same.
//
// The guardian starts the job itself, in a new process group, and reports
// its pid and, later, its wait status: so the process group exists only
// while a guardian watches it, and there is no moment in which the parent
// could die with a job running that nobody will kill. (Linux's parent-death
// signal would reach only a direct child, not its children, and is tied to
// the thread that forked, which a Go program does not control.)
//
// What is not covered: a process that leaves the job's process group
// (setsid, setpgid: a daemon that detaches) is beyond the guardian's reach;
// a guardian that is itself SIGKILLed guards nothing (the parent sees
// ErrGuardianLost and can act); and a process group whose members have all
// exited may, in principle, have its number reused before the guardian's
// SIGKILL, as any kill(2) of a process group allows.
package procguard
