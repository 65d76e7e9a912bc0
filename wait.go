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
	"github.com/quorumlock/redlock/internal/round"
)

// Lock acquires the lock called name, retrying until it succeeds, ctx
// ends, or an outage outlasts the client's bound. It gives up at once on
// errors that retrying cannot fix (ErrWrongType, ErrNotProvisioned,
// ErrWrongNodeList, ErrAuth, ErrNoPermission, ErrScript, ErrFencingNode,
// ErrClosed, and the name errors of TryLock, found before any attempt).
// While another owner holds the lock it waits until ctx ends; the error is
// then the last attempt's *QuorumError with ctx's error as its Cause. When
// its attempts have failed for other reasons than contention (nodes down,
// paused, full or read-only, too few answering) for the client's
// WithMaxOutage bound (DefaultMaxOutage, 15 s), with no attempt lost to
// another owner in between, it returns the last attempt's *QuorumError,
// whose Kind says why (ErrUnavailable, say), whose Nodes give every node's
// cause, and whose GaveUpAfter says how long the attempts had failed.
// While attempts fail so, it logs a warning
// with each node's cause through the client's logger (WithLogger), at most
// one per lock name every 5 seconds; a successful attempt logs nothing.
// Its pauses between such attempts double each time, up to a second, so
// that waiters do not keep an overloaded node or machine overloaded.
//
// A waiting Lock joins the lock's queue on the nodes, and Unlock promises
// the lock to the longest-waiting live waiter for a moment (two node
// timeouts), so contended locks pass in arrival order rather than to
// whoever's attempt lands first. The promised waiter is woken by a release
// notification (Redis pub/sub, one connection per node shared by the
// client's waiters); the others sleep on. A waiter that misses its
// notification retries after a random delay within the configured bounds,
// and a promise nobody takes expires (the waiter it was made to, if it does
// not try again, loses its place at the next release). Waiters that came at
// the same moment may be promised the lock on different nodes, so that none
// can take it; they give their promises back, and try again, the oldest
// first. TryLock
// does not queue, and is refused while the lock is promised to a waiter.
func (c *Client) Lock(ctx context.Context, name string, opts ...LockOption) (_ *Lock, err error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	ls, err := c.leaseOf(c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if l, err := c.reentry(ctx, name, ls.reentrant, true); l != nil || err != nil {
		return l, err
	}
	return waitInLine(ctx, c, name, lockLine(c.lockKey(name)), func(ctx context.Context, waiter string, waited time.Duration) (*Lock, error) {
		return c.tryLock(ctx, name, waiter, waited, ls)
	})
}

// line is where a waiting call waits on the nodes: the queue and
// notifications of key, its waiters' ids ending in suffix (a semaphore's
// line reads there what a waiter asks for), and the call that takes a
// waiter that gave up out of it.
type line struct {
	key, suffix string
	leave       func(waiter string) *nodescript.Call
}

// lockLine is the line of a lock key: its queue.
func lockLine(key string) line {
	return line{key: key, leave: func(waiter string) *nodescript.Call {
		return nodescript.NewCall(nodescript.Leave, nodescript.BoxKeys(leaveKeys(key)...), waiter)
	}}
}

// waitInLine is the waiting loop of the primitives whose waiters queue on
// the nodes (Lock, a read-write lock's writers, a semaphore's Acquire):
// try makes one attempt for the waiter, which has waited waited so far,
// in ln. Lock's doc states what it does.
func waitInLine[T any](ctx context.Context, c *Client, name string, ln line,
	try func(ctx context.Context, waiter string, waited time.Duration) (T, error)) (_ T, err error) {
	var none T
	if !c.rounds.IfOpen(func() { c.locks.Add(1) }) { // before Close can wait for the Lock calls
		return none, ErrClosed
	}
	defer c.locks.Done() // after the leave below
	started := c.cfg.clock.Now()
	waiter := c.id + "/" + strconv.FormatUint(c.waiters.Add(1), 10) + ln.suffix
	key := ln.key
	queued := false          // an attempt reached the nodes, which put this waiter in the queue
	var last []chan struct{} // the last failed attempt's calls, per node
	defer func() {
		if err != nil && queued {
			// After that attempt's call on each node: a late call would
			// put the waiter back in the queue, to be promised the lock.
			c.queue.Leave(ln.leave(waiter), last)
		}
	}()
	var w *fairqueue.Waiting // registered for notifications
	if c.queue.Subscribed(key) {
		// Listen before the first attempt, so that a release right after it
		// cannot go unheard and no second look is needed.
		var done func()
		w, done, _ = c.queue.Register(key, waiter)
		defer done()
	}
	woken, backoff := false, 0 // after a wake-up: retry with short, growing delays
	var out outage             // attempts in a row lost for want of answers, not to a holder
	var prev *QuorumError      // the last failed attempt's error
	for attempts := 1; ; attempts++ {
		if err := ctx.Err(); err != nil {
			if prev != nil {
				return none, prev.ended(ctx)
			}
			return none, &QuorumError{Op: "lock", Name: name, Cause: err}
		}
		attemptStart := c.cfg.clock.Now()
		l, err := try(ctx, waiter, attemptStart.Sub(started))
		queued = queued || !errors.Is(err, ErrClosed) // a closed client sent nothing
		var qe *QuorumError
		if errors.As(err, &qe) && qe.after != nil {
			last = qe.after
		}
		if qe != nil && qe.Cause != nil && qe.Kind == nil && prev != nil {
			// ctx ended this attempt before the nodes said anything: the
			// last attempt they answered says why the call waited.
			return none, prev.ended(ctx)
		}
		if err == nil || qe == nil || qe.Cause != nil || lease.Final(qe.Kind) {
			return l, err
		}
		prev = qe
		c.warnRetrying(qe, attempts, started)
		if qe.lostToPromises {
			c.queue.Yield(yieldKeys(key), waiter)
			if w != nil {
				c.queue.ForgetPromises(w)
			}
		}
		delay, gaveUp := c.nextDelay(&out, qe, attemptStart)
		if gaveUp {
			return none, qe
		}
		if !woken && splitVote(qe.Nodes) {
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
			w, done, listening = c.queue.Register(key, waiter)
			defer done()
			if listening {
				// Another waiter's subscription, confirmed before this one
				// registered: a release since the attempt went unheard. Look
				// again soon, at a random moment so that waiters that
				// collided part. (Otherwise WakeListening will come.)
				delay = rand.N(max(c.cfg.nodeTimeout/10, time.Millisecond))
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return none, qe.ended(ctx)
		case <-c.rounds.Closing():
			// Not after a retry delay that may be long: a shutdown waits on us.
			t.Stop()
			return none, ErrClosed
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
				if !c.gatherPromises(ctx, w) {
					return none, qe.ended(ctx)
				}
				continue
			}
			// Nobody was promised the lock: everyone may try. Those that
			// have waited longer try first.
			woken, backoff = true, 1
			if !sleepCtx(ctx, wakeDelay(c.cfg.clock.Now().Sub(started))) {
				return none, qe.ended(ctx)
			}
		}
	}
}

// gatherPromises waits, after a first promise, until a majority of the
// nodes have promised the lock to w, for a tenth of a node timeout at most.
// The nodes publish their promises as the releases land on them: an attempt
// made on the first one met nodes whose release was still on its way, was
// refused there, and had to be rolled back and made again (2.2 to 2.6
// attempts per contended acquisition, each a round on every node). A
// majority may never come (promises split between waiters, a holder that
// died while unlocking); then the waiter tries anyway, and gives its
// promises back if they were too few. It reports false if ctx ended first.
func (c *Client) gatherPromises(ctx context.Context, w *fairqueue.Waiting) bool {
	need := round.Majority(len(c.nodes))
	if c.queue.Promises(w) >= need {
		return true
	}
	t := time.NewTimer(c.cfg.nodeTimeout / 10)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case reason := <-w.Wake():
			if reason != fairqueue.WakePromised || c.queue.Promises(w) >= need {
				return true
			}
		}
	}
}

// splitVote reports an attempt lost although some nodes granted it while
// others refused it: the lock was free, and attempts of other waiters split
// the votes. An attempt lost to nodes that did not answer is not one: the
// nodes or the machine are overloaded, and retrying at once would only add
// to the load, so it waits the configured retry delay.
func splitVote(nodes []NodeResult) bool {
	granted, refused := false, false
	for _, n := range nodes {
		granted = granted || n.Outcome == NodeGranted
		refused = refused || n.Outcome == NodeRefused
	}
	return granted && refused
}

// contended reports an attempt lost to other owners (the lock held, or
// promised to other waiters, or a newer token committed meanwhile) rather
// than to nodes that failed or did not answer: Lock waits out contention
// until ctx ends, but not an outage (WithMaxOutage).
func contended(qe *QuorumError) bool {
	return qe.Kind == ErrLocked || qe.Kind == ErrSuperseded || qe.lostToPromises
}
