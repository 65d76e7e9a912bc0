package procguard

import "syscall"

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER, linux/prctl.h

// becomeSubreaper makes the job's orphans the guardian's children, so that
// it reaps them, rather than an init that may not (a container's PID 1).
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
