package waiting

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/internal/fairqueue"
	"github.com/quorumlock/redlock/internal/round"
)

// InLine is the waiting loop of the calls whose waiters queue on the
// nodes (Lock, a read-write lock's writers, a semaphore's Acquire): try
// makes one attempt for the waiter, which has waited waited so far, in
// ln. The root package's Client.Lock documents what it does.
func InLine[T any](ctx context.Context, lp *Loop, name string, ln Line,
	try func(ctx context.Context, waiter string, waited time.Duration) (T, error)) (_ T, err error) {
	var none T
	if !lp.begin() { // before Close can wait for the waiting calls
		return none, round.ErrClosed
	}
	defer lp.calls.Done() // after the leave below
	started := lp.Clock.Now()
	waiter := lp.waiter(ln.Suffix)
	queued := false          // an attempt reached the nodes, which put this waiter in the queue
	var last []chan struct{} // the last failed attempt's calls, per node
	defer func() {
		if err != nil && queued {
			// After that attempt's call on each node: a late call would
			// put the waiter back in the queue, to be promised the lock.
			lp.Queue.Leave(ln.Leave(waiter), last)
		}
	}()
	var w *fairqueue.Waiting // registered for notifications
	if lp.Queue.Subscribed(ln.Key) {
		// Listen before the first attempt, so that a release right after it
		// cannot go unheard and no second look is needed.
		var done func()
		w, done, _ = lp.Queue.Register(ln.Key, waiter)
		defer done()
	}
	woken, backoff := false, 0 // after a wake-up: retry with short, growing delays
	var out outage             // attempts in a row lost for want of answers, not to a holder
	var prev Failed            // the last failed attempt's
	for attempts := 1; ; attempts++ {
		if err := ctx.Err(); err != nil {
			if prev != nil {
				return none, prev.Ended(ctx)
			}
			return none, lp.NotTried(name, err)
		}
		attemptStart := lp.Clock.Now()
		l, err := try(ctx, waiter, attemptStart.Sub(started))
		queued = queued || !errors.Is(err, round.ErrClosed) // a closed client sent nothing
		f, ok := lp.Failed(err)
		if ok && f.After() != nil {
			last = f.After()
		}
		if ok && f.Unanswered() && prev != nil {
			// ctx ended this attempt before the nodes said anything: the
			// last attempt they answered says why the call waited.
			return none, prev.Ended(ctx)
		}
		if err == nil || !ok || f.Over() {
			return l, err
		}
		prev = f
		lp.warnRetrying(f, attempts, started)
		if f.LostToPromises() {
			lp.Queue.Yield(ln.Yield, waiter)
			if w != nil {
				lp.Queue.ForgetPromises(w)
			}
		}
		delay, lasted := lp.Delays.next(&out, f.Contended(), attemptStart, lp.Clock.Now())
		if lasted > 0 {
			return none, f.GaveUp(lasted)
		}
		if !woken && f.SplitVote() {
			// Nobody holds the lock on a majority, but others tried at the
			// same moment: retry soon, as after a wake-up.
			woken, backoff = true, 1
		}
		if woken {
			// Woken waiters of several clients can split the votes so that
			// nobody wins, and then no Unlock will wake anyone: retry after
			// short random delays that double each time, until they reach
			// the configured retry delay.
			if short := handoffSpread << backoff; short < delay {
				delay = rand.N(short)
				backoff++
			} else {
				woken = false
			}
		}
		if w == nil {
			var done func()
			var listening bool
			w, done, listening = lp.Queue.Register(ln.Key, waiter)
			defer done()
			if listening {
				// Another waiter's subscription, confirmed before this one
				// registered: a release since the attempt went unheard. Look
				// again soon. (Otherwise WakeListening will come.)
				delay = lp.glance()
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return none, f.Ended(ctx)
		case <-lp.Rounds.Closing():
			// Not after a retry delay that may be long: a shutdown waits on us.
			t.Stop()
			return none, round.ErrClosed
		case <-t.C:
		case reason := <-w.Wake():
			t.Stop()
			switch reason {
			case fairqueue.WakeListening:
				continue // one look; later releases will reach us
			case fairqueue.WakePromised:
				// The lock is ours to take: at once, when a majority of the
				// nodes have promised it.
				woken, backoff = true, 1
				if !lp.gatherPromises(ctx, w) {
					return none, f.Ended(ctx)
				}
				continue
			}
			// Nobody was promised the lock: everyone may try. Those that
			// have waited longer try first.
			woken, backoff = true, 1
			if !sleepCtx(ctx, wakeDelay(lp.Clock.Now().Sub(started))) {
				return none, f.Ended(ctx)
			}
		}
	}
}
