package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
	leaseengine "github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/procguard"
)

// holding says how holdWhileRunning keeps a lock.
type holding struct {
	ttl     time.Duration // the client's TTL: extend every ttl/3
	grace   time.Duration // from a SIGTERM (or a passed-on signal) to the job's group to its SIGKILL
	holdFor time.Duration // keep the lock at least this long after taking it
	keep    bool          // leave the lock to expire instead of releasing it
	// killMargin, for a leadership (--elect), is how long before the
	// lease's end the job must be gone: its SIGTERM goes out --grace before
	// that, and the guardian's SIGKILL lands then at the latest. A lock's
	// job (0) gets SIGTERM at the validity's end at the latest, and SIGKILL
	// --grace after it.
	killMargin time.Duration
}

// killAt is when the guardian kills the job of a lease that ends at until
// unless an extension moves it: --grace after it for a lock, as exec's own
// SIGKILL would be; killMargin before it for a leadership, so that a
// stopped exec's service never outlives its lease.
func (h holding) killAt(until time.Time) time.Time {
	if h.killMargin > 0 {
		return until.Add(-h.killMargin)
	}
	return until.Add(h.grace)
}

// electGrace checks --grace for --elect: the job's SIGTERM goes out
// --grace plus the margin before the lease ends, which must leave the
// leadership's keep-alive (every TTL/3) a round of its own to fail before
// the job is stopped. Unset, it is TTL/5.
func electGrace(ttl, grace time.Duration, set bool) (time.Duration, error) {
	margin := leaseengine.StopMargin(ttl)
	if !set {
		return ttl / 5, nil
	}
	if limit := ttl/3 - margin; grace > limit {
		return 0, fmt.Errorf("--grace %v with --elect: the SIGKILL must land before the lease can pass, so --grace "+
			"is at most TTL/3 minus the margin (%v for --ttl %v); lower --grace or raise --ttl", grace, limit, ttl)
	}
	return grace, nil
}

// holdWhileRunning has guard run the job (argv, in a process group of its
// own, which the guardian kills if exec dies) under l,
// extending it, and returns only once nothing of the group runs any more:
//
//   - The lock lost (an extension failed with too little validity left to
//     retry, or the validity ended, even while an extension still waits for
//     the nodes): the group gets SIGTERM, then SIGKILL h.grace later; 75.
//   - A SIGINT or SIGTERM to exec is passed on to the group, and SIGKILL
//     follows h.grace later; a second one sends SIGKILL at once. A
//     cancellation of ctx that is no signal sends SIGTERM, with the same
//     SIGKILL after h.grace.
//   - The leader (the command itself) exits: what it left in its group gets
//     SIGTERM, then SIGKILL h.grace later, while the lock is still held and
//     extended; the exit code is still the leader's.
//
// If the job ends sooner than h.holdFor after l was taken, the lock is
// kept, extended, until then. If the release finds that the lock had
// expired, the run may have overlapped another host's: that is reported as
// a lost lock (75), whatever the job's own code.
func holdWhileRunning(ctx context.Context, l lease, guard *procguard.Guardian, argv []string, h holding) (err error) {
	taken := time.Now()
	release := true
	defer func() {
		if !release {
			return
		}
		uerr := l.Unlock(context.Background())
		var lost lostError
		if errors.Is(uerr, redlock.ErrExpired) && !errors.As(err, &lost) {
			err = &exitError{75, lostError{fmt.Errorf("lock %q had expired when it was released: another host may have "+
				"run meanwhile (the command's own result: %v): %w", l.Name(), errOrOK(err), uerr)}}
		}
	}()
	env := append(os.Environ(), "REDLOCK_NAME="+l.Name(), "REDLOCK_TOKEN="+strconv.FormatUint(l.Token(), 10))
	if p, ok := l.(permit); ok {
		env = append(env, "REDLOCK_SLOT="+strconv.Itoa(p.Slot()))
	}
	if _, ok := l.(leadership); ok {
		env = append(env, "REDLOCK_TERM="+strconv.FormatUint(l.Token(), 10))
	}
	// Listen before the start, so that no signal falls between the two.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// A signal that came between the acquisition and Notify went only to
	// ctx: the job would start and never hear of it. Start nothing.
	if cause := context.Cause(ctx); cause != nil {
		guard.Close()
		var s signalled
		if errors.As(cause, &s) {
			return &exitError{128 + int(s.sig), fmt.Errorf("holding %q, before the command started: %w", l.Name(), s)}
		}
		return &exitError{1, fmt.Errorf("holding %q, before the command started: %w", l.Name(), cause)}
	}
	pgid, err := guard.Run(env)
	if err != nil {
		guard.Close()
		var se *procguard.StartError
		if errors.As(err, &se) {
			return &exitError{127, fmt.Errorf("start %s: %w", argv[0], err)}
		}
		return &exitError{1, err}
	}
	group := processGroup(pgid)
	// Should exec be stopped rather than die (Ctrl-Z, SIGSTOP), nothing
	// here runs at the validity's end: the guardian kills the group then
	// (killAt). Every extension moves it.
	_ = guard.Deadline(h.killAt(l.Until()))
	// Deferred after the release, so run before it: nothing of the job may
	// outlive the lock. Every path below has already emptied the group.
	defer func() {
		if group.alive() {
			group.signal(syscall.SIGKILL)
		}
		guard.Close()
	}()
	exited := make(chan error, 1)
	go func() { exited <- jobExit(guard.Wait()) }()
	return (&jobRun{l: l, guard: guard, h: h, taken: taken, group: group, name: argv[0], release: &release}).loop(ctx, sigs, exited)
}

// jobExit is the leader's wait status as exec's outcome: nil for 0, else
// its code, or 128+N if signal N ended it.
func jobExit(ws syscall.WaitStatus, err error) error {
	if err != nil {
		return err
	}
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if code == 0 {
		return nil
	}
	return &exitError{code, fmt.Errorf("command exited with %d", code)}
}

func errOrOK(err error) any {
	if err == nil {
		return "exit 0"
	}
	return err
}

// lease is what exec holds while CMD runs: a lock, or one of a
// semaphore's permits (--permits).
type lease interface {
	Name() string
	Token() uint64
	Until() time.Time
	Done() <-chan struct{}
	Extend(ctx context.Context, opts ...redlock.LockOption) error
	Unlock(ctx context.Context) error
}

// permit is a semaphore's permit as a lease: its Name is its slot's
// ("NAME#<slot>"), the fence's resource for it.
type permit struct{ *redlock.Permit }

func (p permit) Unlock(ctx context.Context) error { return p.Release(ctx) }
