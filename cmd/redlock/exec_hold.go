package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
)

// holding says how holdWhileRunning keeps a lock.
type holding struct {
	ttl     time.Duration // the client's TTL: extend every ttl/3
	grace   time.Duration // SIGTERM to SIGKILL after the lock is lost
	holdFor time.Duration // keep the lock at least this long after taking it
	keep    bool          // leave the lock to expire instead of releasing it
}

// holdWhileRunning runs the child under l, extending it, and stops the
// child's process group if the lock is lost: as soon as an extension fails
// and the validity left would not last until the next try, and at the
// latest when the validity ends, even while an extension is still waiting
// for the nodes. If the child ends sooner than h.holdFor after l was
// taken, the lock is kept, extended, until then. If the release finds that
// the lock had expired, the run may have overlapped another host's: that is
// reported as a lost lock (75), whatever the child's own code.
func holdWhileRunning(ctx context.Context, l *redlock.Lock, argv []string, h holding) (err error) {
	taken := time.Now()
	release := true
	defer func() {
		if !release {
			return
		}
		uerr := l.Unlock(context.Background())
		var ee *exitError
		if errors.Is(uerr, redlock.ErrExpired) && !(errors.As(err, &ee) && ee.code == 75) {
			err = &exitError{75, fmt.Errorf("lock %q had expired when it was released: another host may have "+
				"run meanwhile (the command's own result: %v): %w", l.Name(), errOrOK(err), uerr)}
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "REDLOCK_NAME="+l.Name(), "REDLOCK_TOKEN="+strconv.FormatUint(l.Token(), 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Listen before the start, so that no signal falls between the two.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return &exitError{127, fmt.Errorf("start %s: %w", argv[0], err)}
	}
	group := processGroup(cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Extensions run in their own goroutine, so that the loop sees the
	// validity end while one waits for the nodes (up to the node timeout).
	extended := make(chan error, 1)
	extending := false
	defer func() {
		if extending {
			<-extended // bounded by the node timeout
		}
	}()
	tick := time.NewTicker(h.ttl / 3)
	defer tick.Stop()
	var lost error
	var killAt time.Time
	var kill *time.Timer
	stop := func(why error) {
		lost = why
		fmt.Fprintf(os.Stderr, "redlock: lock %q lost (%v); sending SIGTERM to %s and its process group, SIGKILL in %v\n", l.Name(), why, argv[0], h.grace)
		group.signal(syscall.SIGTERM)
		killAt = time.Now().Add(h.grace)
		kill = time.AfterFunc(h.grace, func() { group.signal(syscall.SIGKILL) })
	}
	var result error
	// finish ends a run whose child has exited. A kept lock (a tick's name)
	// is extended once more, so that it stays taken a whole TTL after the
	// child or the hold ended, not just what was left of the last extension.
	finish := func() error {
		if h.keep {
			release = false
			if extending {
				<-extended
				extending = false
			}
			if err := l.Extend(context.Background()); err != nil {
				fmt.Fprintf(os.Stderr, "redlock: could not extend %q one last time: %v\n", l.Name(), err)
			}
		}
		return result
	}
	var held <-chan time.Time // after the child's exit: the end of --hold-for
	interrupts := 0           // signals and cancellations: no holding on after the child
	interrupted, expired := ctx.Done(), l.Done()
	for {
		select {
		case err := <-exited:
			exited = nil
			if lost != nil {
				// The leader is gone; what it started must not outlive the
				// lock's loss either, so the rest of the group gets the
				// rest of the grace.
				reapGroup(group, killAt)
				kill.Stop()
				return &exitError{75, fmt.Errorf("lock %q lost while the command ran: %w", l.Name(), lost)}
			}
			result = childExit(err)
			left := time.Until(taken.Add(h.holdFor))
			if left <= 0 || interrupts > 0 {
				return finish()
			}
			held = time.After(left)
		case <-held:
			return finish()
		case s := <-sigs:
			interrupts++
			if exited == nil { // holding on after the child: an interrupt ends it
				return finish()
			}
			group.signal(s.(syscall.Signal))
		case <-interrupted:
			interrupted = nil
			interrupts++
			if exited == nil {
				return finish()
			}
			if _, ok := context.Cause(ctx).(signalled); !ok {
				// Cancelled by a caller, not a signal (which sigs passed on).
				group.signal(syscall.SIGTERM)
			}
		case <-expired:
			expired = nil
			if exited == nil {
				fmt.Fprintf(os.Stderr, "redlock: lock %q lost after the command ended, within --hold-for\n", l.Name())
				return result
			}
			if lost == nil {
				stop(errors.New("validity ended"))
			}
		case <-tick.C:
			if lost != nil || extending {
				continue
			}
			extending = true
			go func() { extended <- l.Extend(context.Background()) }()
		case err := <-extended:
			extending = false
			if lost == nil && err != nil && (errors.Is(err, redlock.ErrExpired) || time.Until(l.Until()) <= h.ttl/3) {
				if exited == nil {
					fmt.Fprintf(os.Stderr, "redlock: lock %q lost after the command ended, within --hold-for: %v\n", l.Name(), err)
					return result
				}
				stop(err)
			}
		}
	}
}

// reapGroup waits, until deadline at the latest, for the processes left in
// the group to exit, then kills what remains.
func reapGroup(g processGroup, deadline time.Time) {
	for g.alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	g.signal(syscall.SIGKILL)
}

func errOrOK(err error) any {
	if err == nil {
		return "exit 0"
	}
	return err
}

func childExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		return &exitError{code, fmt.Errorf("command exited with %d", code)}
	}
	return &exitError{1, err}
}
