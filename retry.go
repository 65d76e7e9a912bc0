package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

// retry is the waiting loop of the primitives that do not wait in a queue
// (LockMulti, Semaphore.Acquire): it makes attempts with try until one
// succeeds, fails for good (a final Kind, or not a *QuorumError), ctx ends
// (the last attempt's error with ctx's as its Cause), the client closes
// (ErrClosed), or attempts lost to an outage outlast WithMaxOutage. It
// pauses the client's jittered retry delay between attempts, doubled per
// attempt in a row lost to an outage, and short random delays that double
// after a split vote. name names the waiter in errors and warnings.
func (c *Client) retry(ctx context.Context, name string, try func() error) error {
	if !c.rounds.IfOpen(func() { c.locks.Add(1) }) { // before Close can wait for the waiting calls
		return ErrClosed
	}
	defer c.locks.Done()
	started := c.cfg.clock.Now()
	var out outage
	var prev *QuorumError
	backoff := 1 // after a split vote: short random delays that double
	for attempts := 1; ; attempts++ {
		if err := ctx.Err(); err != nil {
			if prev != nil {
				return prev.ended(ctx)
			}
			return &QuorumError{Op: "lock", Name: name, Cause: err}
		}
		attemptStart := c.cfg.clock.Now()
		err := try()
		var qe *QuorumError
		if err == nil || !errors.As(err, &qe) || qe.Cause != nil || lease.Final(qe.Kind) {
			return err
		}
		prev = qe
		c.warnRetrying(qe, attempts, started)
		delay, gaveUp := c.nextDelay(&out, qe, attemptStart)
		if gaveUp {
			return qe
		}
		if short := handoffSpread << backoff; splitVote(qe.Nodes) && short < delay {
			delay = rand.N(short)
			backoff++
		} else {
			backoff = 1
		}
		if !c.pause(ctx, delay) {
			if ctx.Err() != nil {
				return qe.ended(ctx)
			}
			return ErrClosed
		}
	}
}

// pause waits d, and reports false if ctx ended or the client began to
// close first.
func (c *Client) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.rounds.Closing():
		return false
	case <-t.C:
		return true
	}
}
