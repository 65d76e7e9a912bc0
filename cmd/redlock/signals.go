package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// signalled is the cause of the command's context when a signal ended it:
// exec passes that very signal on to its command and does not send a
// SIGTERM of its own, and an interrupted wait for the lock exits 128+N as a
// shell would.
type signalled struct{ sig syscall.Signal }

func (s signalled) Error() string { return fmt.Sprintf("interrupted by %v", s.sig) }

// signalContext is cancelled, with a signalled cause, by the first SIGINT
// or SIGTERM. Later ones are left to whoever else listens (exec passes the
// first on to its job's process group, and answers a second with SIGKILL).
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			cancel(signalled{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() { signal.Stop(sigs); close(done); cancel(nil) }
}

// processGroup is a started command's process group: the command runs as
// its leader, so that whatever it starts (a shell's children, a script's
// background jobs) is signalled with it and nothing is left running
// unlocked after the lock is lost or released.
type processGroup int

// signal sends s to every process in the group; an empty group is no error.
func (g processGroup) signal(s syscall.Signal) { _ = syscall.Kill(-int(g), s) }

// alive reports whether any process of the group is still running.
func (g processGroup) alive() bool { return syscall.Kill(-int(g), 0) == nil }
