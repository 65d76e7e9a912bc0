package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/procguard"
)

// leadership is an election's Leadership as exec's lease (--elect). Its
// own keep-alive extends it, so Extend only reports whether it still
// leads; Done closes when it is lost, before its lease can pass, and exec
// stops the job then, as for a lost lock.
type leadership struct {
	*redlock.Leadership
	name string
}

func (l leadership) Name() string  { return l.name }
func (l leadership) Token() uint64 { return l.Term() }

func (l leadership) Extend(context.Context, ...redlock.LockOption) error {
	select {
	case <-l.Done():
		return fmt.Errorf("%w: %w", redlock.ErrExpired, context.Cause(l.Context(context.Background())))
	default:
		return nil
	}
}

func (l leadership) Unlock(ctx context.Context) error { return l.Resign(ctx) }

// runElected keeps the job argv running while this host leads the
// election name (exec --elect): it campaigns (waiting in line until
// elected, or until a signal), runs the job with REDLOCK_TERM, and stops it
// when the leadership is lost, before the lease can pass. With again it
// campaigns again after a loss (exit 75 otherwise); every other end is the
// job's, as for a lock.
func runElected(ctx context.Context, c *redlock.Client, name, value string, again bool, argv []string, h holding) error {
	e, err := c.Election(name)
	if err != nil {
		return &exitError{2, err}
	}
	for {
		guard, err := procguard.Start(argv)
		if err != nil {
			return &exitError{1, err}
		}
		ld, err := e.Campaign(ctx, value)
		if err != nil {
			guard.Close()
			if s, ok := context.Cause(ctx).(signalled); ok {
				return &exitError{128 + int(s.sig), fmt.Errorf("campaigning for %q: %w", name, s)}
			}
			return acquireError(name, err)
		}
		fmt.Fprintf(os.Stderr, "redlock: elected leader of %q, term %d\n", name, ld.Term())
		err = holdWhileRunning(ctx, leadership{ld, name}, guard, argv, h)
		guard.Close()
		var lost lostError // the leadership lost, not the command's own 75
		if !again || !errors.As(err, &lost) || ctx.Err() != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "redlock: %v; campaigning again\n", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(redlock.ObservePoll(h.ttl)):
		}
	}
}
