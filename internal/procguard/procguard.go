package procguard

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// guardArg, as the first argument, makes the executable a guardian (Main).
const guardArg = "__redlock_procguard"

// Guardian is the parent's side of a guardian process. Its methods are not
// safe for concurrent use, except Wait, which may run beside Close.
type Guardian struct {
	cmd     *exec.Cmd
	ctl     *os.File // the write end of the guardian's lifeline; only this process holds it
	reports *os.File
	lines   *bufio.Reader
	closed  bool
}

// Start starts a guardian. argv is the job that Run starts (nil when there
// is no job, only paths to remove); the job gets this process's standard
// input, output and error. Start returns once the guardian is ready; that
// takes a moment (a new process of this executable): start it before the
// clock that matters runs, Run when the job is due.
func Start(argv []string) (*Guardian, error) {
	self, err := executable()
	if err != nil {
		return nil, err
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: self, Args: append([]string{"redlock-guardian", guardArg}, argv...),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		ExtraFiles:  []*os.File{ctlR, repW}, // fds 3 and 4
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	err = cmd.Start()
	ctlR.Close() // the guardian's ends: this process must not hold them
	repW.Close()
	if err != nil {
		ctlW.Close()
		repR.Close()
		return nil, fmt.Errorf("procguard: start the guardian: %w", err)
	}
	g := &Guardian{cmd: cmd, ctl: ctlW, reports: repR, lines: bufio.NewReader(repR)}
	// Wait until it guards: Run must cost no start-up time.
	if verb, arg, err := g.report(); err != nil || verb != "ready" {
		g.Close()
		return nil, fmt.Errorf("procguard: the guardian did not start (%q, %v)", verb+" "+arg, err)
	}
	return g, nil
}

// executable is this program's own file. On Linux /proc/self/exe is used
// rather than the path it was started from: it still names this very
// program after an upgrade has replaced or removed the file on disk.
func executable() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// Remove has the guardian remove path (and all it contains) if this
// process ends without Close. The request is in the pipe when Remove
// returns, so path may be created right after: the guardian reads it even
// if this process dies at once.
func (g *Guardian) Remove(path string) error {
	return g.send("remove " + strconv.Quote(path))
}

// Run starts the job, with the environment env, in a new process group
// and returns that group's id (the job's pid). A job that could not be
// started is a *StartError.
func (g *Guardian) Run(env []string) (pgid int, err error) {
	for _, kv := range env {
		if err := g.send("env " + strconv.Quote(kv)); err != nil {
			return 0, err
		}
	}
	if err := g.send("run"); err != nil {
		return 0, err
	}
	verb, arg, err := g.report()
	if err != nil {
		return 0, err
	}
	switch verb {
	case "started":
		if pgid, err = strconv.Atoi(arg); err == nil {
			return pgid, nil
		}
	case "failed":
		msg, err := strconv.Unquote(arg)
		if err == nil {
			return 0, &StartError{Err: msg}
		}
	}
	return 0, fmt.Errorf("procguard: unexpected report %q", verb+" "+arg)
}

// Deadline has the guardian SIGKILL the job's process group once at has
// passed, unless a later Deadline moves it: the parent may be stopped
// rather than dead (Ctrl-Z, SIGSTOP, a debugger), and then nothing else
// stops the job. The time is sent as an absolute CLOCK_MONOTONIC instant,
// so that a guardian that reads the request late does not push it back.
func (g *Guardian) Deadline(at time.Time) error {
	return g.send("deadline " + strconv.FormatInt(monotonicNow()+int64(time.Until(at)), 10))
}

// monotonicNow is CLOCK_MONOTONIC in nanoseconds: one clock for the parent
// and its guardian, unlike Go's per-process monotonic readings.
func monotonicNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Wait waits for the job started by Run to exit and returns its wait
// status; what it started may still run in its process group. If the
// guardian ends first the error is ErrGuardianLost.
func (g *Guardian) Wait() (syscall.WaitStatus, error) {
	verb, arg, err := g.report()
	if err != nil {
		return 0, err
	}
	if verb == "exited" {
		if ws, err := strconv.ParseUint(arg, 10, 32); err == nil {
			return syscall.WaitStatus(ws), nil
		}
	}
	return 0, fmt.Errorf("procguard: unexpected report %q", verb+" "+arg)
}

// Close disarms the guardian, which exits without killing or removing
// anything, and waits for it to exit. The caller has made sure that
// nothing of the job runs any more. Close is safe to call more than once.
func (g *Guardian) Close() error {
	if g.closed {
		return nil
	}
	err := g.send("disarm")
	g.closed = true
	err = errors.Join(err, g.ctl.Close())
	werr := g.cmd.Wait()
	g.reports.Close()
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		werr = fmt.Errorf("procguard: the guardian: %w", werr)
	}
	return errors.Join(err, werr)
}

func (g *Guardian) send(line string) error {
	if g.closed {
		return ErrGuardianLost
	}
	if _, err := g.ctl.WriteString(line + "\n"); err != nil {
		return fmt.Errorf("%w: %v", ErrGuardianLost, err)
	}
	return nil
}

// report reads the guardian's next report: a verb and its argument.
func (g *Guardian) report() (verb, arg string, err error) {
	line, err := g.lines.ReadString('\n')
	if err != nil {
		return "", "", fmt.Errorf("%w (%v)", ErrGuardianLost, err)
	}
	verb, arg, _ = strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	return verb, arg, nil
}
