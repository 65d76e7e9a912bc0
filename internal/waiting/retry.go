package waiting

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/internal/fairqueue"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
)

// Retry is the waiting loop of the calls that wait on several keys or in
// no queue (LockMulti, RLock): it makes attempts with try until one
// succeeds, fails for good (Failed.Over, or not a failed attempt), ctx
// ends (the last attempt's Ended), the client closes (round.ErrClosed),
// or attempts lost to an outage outlast the bound (GaveUp). It pauses the
// client's jittered retry delay between attempts, doubled per attempt in
// a row lost to an outage, and short random delays that double after a
// split vote. name names the waiter in errors and warnings.
//
// Once an attempt is lost to a holder, the loop listens to the release
// notifications of w's keys (the writer's key for a reader, the members'
// for a multi-lock): a release that promises the lock to nobody ends its
// pause at once, so a waiter does not sleep out its retry delay while
// what it waits for is free. A call that queues (w.Leave not nil) is one
// waiter in every key's queue, whose id try gets with how long it has
// waited; it is woken by a promise too (the nodes pass on a promise it
// cannot use: lua/multi_wait.lua), and leaves the queues if it gives up.
func Retry(ctx context.Context, lp *Loop, name string, w Watch, try func(waiter string, waited time.Duration) error) (err error) {
	if !lp.begin() { // before Close can wait for the waiting calls
		return round.ErrClosed
	}
	defer lp.calls.Done() // after the leave below
	started := lp.Clock.Now()
	if w.Leave != nil {
		w.id = lp.waiter("")
	}
	var last []chan struct{} // the last failed attempt's calls, per node
	queued := false
	defer func() {
		if err != nil && queued {
			lp.Queue.Leave(w.Leave(w.id), last) // after that attempt's call on each node
		}
	}()
	defer w.stop()
	if w.subscribed(lp) {
		w.start(lp) // before the first attempt: a release right after it is heard
	}
	var out outage
	var prev Failed
	backoff := 1 // after a split vote: short random delays that double
	for attempts := 1; ; attempts++ {
		if err := ctx.Err(); err != nil {
			if prev != nil {
				return prev.Ended(ctx)
			}
			return lp.NotTried(name, err)
		}
		attemptStart := lp.Clock.Now()
		err := try(w.id, attemptStart.Sub(started))
		queued = queued || (w.Leave != nil && !errors.Is(err, round.ErrClosed))
		f, ok := lp.Failed(err)
		if ok && f.After() != nil {
			last = f.After()
		}
		if ok && f.Unanswered() && prev != nil {
			// ctx ended this attempt before the nodes said anything: the
			// last attempt they answered says why the call waited.
			return prev.Ended(ctx)
		}
		if err == nil || !ok || f.Over() {
			return err
		}
		prev = f
		lp.warnRetrying(f, attempts, started)
		delay, lasted := lp.Delays.next(&out, f.Contended(), attemptStart, lp.Clock.Now())
		if lasted > 0 {
			return f.GaveUp(lasted)
		}
		if short := handoffSpread << backoff; f.SplitVote() && short < delay {
			delay = rand.N(short)
			backoff++
		} else {
			backoff = 1
		}
		if w.wake == nil && f.Contended() && w.start(lp) {
			// Subscribed for another waiter already: a release since the
			// attempt went unheard. Look again soon, at a random moment.
			delay = min(delay, lp.glance())
		}
		if !lp.pause(ctx, delay, w.wake) {
			if ctx.Err() != nil {
				return f.Ended(ctx)
			}
			return round.ErrClosed
		}
	}
}

// Watch is what a retry loop listens to: the release notifications of
// Keys, and for a call that waits in their queues, the call that takes it
// out of them (Leave).
type Watch struct {
	Keys  []string
	Leave func(waiter string) *nodescript.Call

	id    string
	wake  chan fairqueue.WakeReason // nil until start
	stops []func()
}

// subscribed reports that the client listens to every key already.
func (w *Watch) subscribed(lp *Loop) bool {
	for _, k := range w.Keys {
		if !lp.Queue.Subscribed(k) {
			return false
		}
	}
	return len(w.Keys) > 0
}

// start listens to the keys, and reports whether every subscription was
// confirmed already (no WakeListening will come).
func (w *Watch) start(lp *Loop) (listening bool) {
	if len(w.Keys) == 0 {
		return false
	}
	w.wake = make(chan fairqueue.WakeReason, 1)
	listening = true
	for _, k := range w.Keys {
		stop, l := lp.Queue.Watch(k, w.id, w.wake)
		w.stops = append(w.stops, stop)
		listening = listening && l
	}
	return listening
}

func (w *Watch) stop() {
	for _, stop := range w.stops {
		stop()
	}
}

// pause waits d, or until a notification on wake (nil: none), and reports
// false if ctx ended or the client began to close first. After a release,
// a waiter that is one of many lets a random moment of handoffSpread pass,
// so that woken waiters do not all land at once; after a promise, a tenth
// of a node timeout at most, for the other nodes' promises to come.
func (lp *Loop) pause(ctx context.Context, d time.Duration, wake <-chan fairqueue.WakeReason) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-lp.Rounds.Closing():
		return false
	case <-t.C:
		return true
	case reason := <-wake:
		switch reason {
		case fairqueue.WakeReleased:
			return sleepCtx(ctx, rand.N(handoffSpread))
		case fairqueue.WakePromised:
			return sleepCtx(ctx, min(lp.Delays.NodeTimeout/10, 10*time.Millisecond))
		}
		return true
	}
}
