package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/internal/fairqueue"
	"github.com/quorumlock/redlock/internal/lease"
)

// retry is the waiting loop of the primitives that do not wait in a queue
// (RLock, LockMulti): it makes attempts with try until one succeeds, fails
// for good (a final Kind, or not a *QuorumError), ctx ends (the last
// attempt's error with ctx's as its Cause), the client closes
// (ErrClosed), or attempts lost to an outage outlast WithMaxOutage. It
// pauses the client's jittered retry delay between attempts, doubled per
// attempt in a row lost to an outage, and short random delays that double
// after a split vote. name names the waiter in errors and warnings.
//
// Once an attempt is lost to a holder, the loop watches the release
// notifications of the lock keys in watch (the writer's key for a reader,
// the members' for a multi-lock): a release that promises the lock to
// nobody ends its pause at once, so a waiter does not sleep out its retry
// delay while what it waits for is free.
func (c *Client) retry(ctx context.Context, name string, watch []string, try func() error) error {
	if !c.rounds.IfOpen(func() { c.locks.Add(1) }) { // before Close can wait for the waiting calls
		return ErrClosed
	}
	defer c.locks.Done()
	started := c.cfg.clock.Now()
	var out outage
	var prev *QuorumError
	backoff := 1 // after a split vote: short random delays that double
	w := watching{c: c, keys: watch}
	defer w.stop()
	if w.subscribed() {
		w.start() // before the first attempt: a release right after it is heard
	}
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
		if w.wake == nil && contended(qe) && w.start() {
			// Subscribed for another waiter already: a release since the
			// attempt went unheard. Look again soon, at a random moment.
			delay = min(delay, rand.N(max(c.cfg.nodeTimeout/10, time.Millisecond)))
		}
		if !c.pause(ctx, delay, w.wake) {
			if ctx.Err() != nil {
				return qe.ended(ctx)
			}
			return ErrClosed
		}
	}
}

// watching is a retry loop's watch of lock keys' releases.
type watching struct {
	c     *Client
	keys  []string
	wake  chan fairqueue.WakeReason // nil until start
	stops []func()
}

// subscribed reports that the client listens to every key already.
func (w *watching) subscribed() bool {
	for _, k := range w.keys {
		if !w.c.queue.Subscribed(k) {
			return false
		}
	}
	return len(w.keys) > 0
}

// start watches the keys, and reports whether every subscription was
// confirmed already (no WakeListening will come).
func (w *watching) start() (listening bool) {
	if len(w.keys) == 0 {
		return false
	}
	w.wake = make(chan fairqueue.WakeReason, 1)
	listening = true
	for _, k := range w.keys {
		stop, l := w.c.queue.Watch(k, w.wake)
		w.stops = append(w.stops, stop)
		listening = listening && l
	}
	return listening
}

func (w *watching) stop() {
	for _, stop := range w.stops {
		stop()
	}
}

// pause waits d, or until a notification on wake (nil: none), and reports
// false if ctx ended or the client began to close first. After a release,
// a waiter that is one of many lets a random moment of handoffSpread pass,
// so that woken waiters do not all land at once.
func (c *Client) pause(ctx context.Context, d time.Duration, wake <-chan fairqueue.WakeReason) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.rounds.Closing():
		return false
	case <-t.C:
		return true
	case reason := <-wake:
		if reason == fairqueue.WakeReleased {
			return sleepCtx(ctx, rand.N(handoffSpread))
		}
		return true
	}
}
