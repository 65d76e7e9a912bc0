package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/quorumlock/redlock/internal/fairqueue"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
)

// retry is the waiting loop of the primitives that wait on several keys or
// in no queue (LockMulti, RLock): it makes attempts with try until one
// succeeds, fails for good (a final Kind, or not a *QuorumError), ctx ends
// (the last attempt's error with ctx's as its Cause), the client closes
// (ErrClosed), or attempts lost to an outage outlast WithMaxOutage. It
// pauses the client's jittered retry delay between attempts, doubled per
// attempt in a row lost to an outage, and short random delays that double
// after a split vote. name names the waiter in errors and warnings.
//
// Once an attempt is lost to a holder, the loop listens to the release
// notifications of w's keys (the writer's key for a reader, the members'
// for a multi-lock): a release that promises the lock to nobody ends its
// pause at once, so a waiter does not sleep out its retry delay while
// what it waits for is free. A call that queues (w.leave not nil) is one
// waiter in every key's queue, whose id try gets with how long it has
// waited; it is woken by a promise too (the nodes pass on a promise it
// cannot use: lua/multi_wait.lua), and leaves the queues if it gives up.
func (c *Client) retry(ctx context.Context, name string, w watch, try func(waiter string, waited time.Duration) error) (err error) {
	if !c.rounds.IfOpen(func() { c.locks.Add(1) }) { // before Close can wait for the waiting calls
		return ErrClosed
	}
	defer c.locks.Done() // after the leave below
	started := c.cfg.clock.Now()
	if w.leave != nil {
		w.id = c.id + "/" + strconv.FormatUint(c.waiters.Add(1), 10)
	}
	var last []chan struct{} // the last failed attempt's calls, per node
	queued := false
	defer func() {
		if err != nil && queued {
			c.queue.Leave(w.leave(w.id), last) // after that attempt's call on each node
		}
	}()
	defer w.stop(c)
	if w.subscribed(c) {
		w.start(c) // before the first attempt: a release right after it is heard
	}
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
		err := try(w.id, attemptStart.Sub(started))
		queued = queued || (w.leave != nil && !errors.Is(err, ErrClosed))
		var qe *QuorumError
		if errors.As(err, &qe) && qe.after != nil {
			last = qe.after
		}
		if qe != nil && qe.Cause != nil && qe.Kind == nil && prev != nil {
			// ctx ended this attempt before the nodes said anything: the
			// last attempt they answered says why the call waited.
			return prev.ended(ctx)
		}
		if err == nil || qe == nil || qe.Cause != nil || lease.Final(qe.Kind) {
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
		if w.wake == nil && contended(qe) && w.start(c) {
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

// watch is what a retry loop listens to: the release notifications of
// keys, and for a call that waits in their queues, its id there and the
// call that takes it out of them.
type watch struct {
	keys  []string
	leave func(waiter string) *nodescript.Call

	id    string
	wake  chan fairqueue.WakeReason // nil until start
	stops []func()
}

// subscribed reports that the client listens to every key already.
func (w *watch) subscribed(c *Client) bool {
	for _, k := range w.keys {
		if !c.queue.Subscribed(k) {
			return false
		}
	}
	return len(w.keys) > 0
}

// start listens to the keys, and reports whether every subscription was
// confirmed already (no WakeListening will come).
func (w *watch) start(c *Client) (listening bool) {
	if len(w.keys) == 0 {
		return false
	}
	w.wake = make(chan fairqueue.WakeReason, 1)
	listening = true
	for _, k := range w.keys {
		stop, l := c.queue.Watch(k, w.id, w.wake)
		w.stops = append(w.stops, stop)
		listening = listening && l
	}
	return listening
}

func (w *watch) stop(*Client) {
	for _, stop := range w.stops {
		stop()
	}
}

// pause waits d, or until a notification on wake (nil: none), and reports
// false if ctx ended or the client began to close first. After a release,
// a waiter that is one of many lets a random moment of handoffSpread pass,
// so that woken waiters do not all land at once; after a promise, a tenth
// of a node timeout at most, for the other nodes' promises to come.
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
		switch reason {
		case fairqueue.WakeReleased:
			return sleepCtx(ctx, rand.N(handoffSpread))
		case fairqueue.WakePromised:
			return sleepCtx(ctx, min(c.cfg.nodeTimeout/10, 10*time.Millisecond))
		}
		return true
	}
}
