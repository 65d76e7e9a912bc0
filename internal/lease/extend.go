package lease

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// ExtendTurn waits for l's turn to extend: Extends of one lease run one
// at a time (see the root package's Extend), and done gives the turn back.
// If ctx ends first it returns a *verdict.Failure of Kind ErrUnavailable.
func (l *Lease) ExtendTurn(ctx context.Context) (done func(), err error) {
	select {
	case l.extending <- struct{}{}:
		return func() { <-l.extending }, nil
	case <-ctx.Done():
		return nil, &verdict.Failure{Op: "extend", Name: l.name, Kind: kind.ErrUnavailable, Cause: ctx.Err()}
	}
}

// Extend re-applies t's TTL from start on a majority, in l's turn
// (ExtendTurn), and returns the new end of the validity and what each node
// answered. On failure err is a *verdict.Failure (or ErrClosed). A shortening
// pulls Until back to where its success would put it before its first
// call is sent, whatever comes of it: each call shortens the key on its
// node as it runs, while the Extend may still be waiting for the others,
// and a call that fails may have run, or may run later. The caller logs
// the failure, with the error it returns.
func (l *Lease) Extend(ctx context.Context, start time.Time, t Term) (until time.Time, nodes []round.NodeResult, err error) {
	if t.TTL < l.TTL() {
		l.pullDeadline(start.Add(l.e.Validity(t.TTL)), t.TTL)
	}
	return l.extend(ctx, start, t)
}

// extend returns the new end of the validity, and what each node answered.
func (l *Lease) extend(ctx context.Context, start time.Time, ls Term) (until time.Time, nodes []round.NodeResult, err error) {
	qe := &verdict.Failure{Op: "extend", Name: l.name}
	released := l.Released()
	select {
	case <-l.done:
		qe.Kind = kind.ErrExpired
		if released {
			qe.Kind = kind.ErrReleased
		}
		return time.Time{}, nil, qe
	default:
	}
	e := l.e
	// The calls unheard now may land at any time, even after this
	// Extend's own call on their node and before its reply: a reply heard
	// during the round must not take its call out of the count.
	unheard := l.unheard.shortestNow(len(e.Nodes))
	op := l.extendOp(ls)
	// Until a majority extends the lock, or so many refuse that it is gone
	// (ErrExpired) rather than unheard of (ErrUnavailable).
	t, err := e.Rounds.Run(ctx, round.Spec{Name: "extend", Op: op}, (*round.Tally).WonOrRefused, nil)
	if t == nil {
		return time.Time{}, nil, err
	}
	if qe.Cause = err; qe.Cause == nil && t.Won() {
		// As in Grant, for the TTL a majority keeps whatever late calls
		// still land (unheard.go).
		until = start.Add(e.Validity(l.unheard.effectiveTTL(t, ls.TTL, unheard)))
		if until.After(e.Clock.Now()) && l.moveDeadline(until, ls.TTL) {
			if e.Observed {
				nodes = t.Snapshot()
			}
			return until, nodes, nil
		}
		qe.Kind = kind.ErrExpired
	}
	// A round already lost when ctx ended still says why it was lost.
	if qe.Kind == nil && (qe.Cause == nil || t.Lost()) {
		qe.Kind = kind.ErrUnavailable
		if t.RefusedByMajority() {
			qe.Kind = kind.ErrExpired
		}
	}
	if qe.Kind != nil && l.Released() && l.unlocked() {
		// This handle's Unlock began before the outcome was decided, and
		// deleted the lock on a majority: it, not an expiry, took the keys
		// (or keeps the new deadline from being set). An Unlock that found
		// the lock gone (ErrExpired) says the extension's refusals are an
		// expiry's, or another holder's, and they are reported as such.
		qe.Kind = kind.ErrReleased
	}
	qe.Nodes = t.Snapshot()
	return time.Time{}, qe.Nodes, qe
}

// unlocked waits for the Release that has begun on l to decide, and tells
// whether it deleted the lock on a majority.
func (l *Lease) unlocked() bool {
	l.unlockOnce.Do(func() {}) // returns once the running Release has
	return l.unlockErr == nil
}

// moveDeadline sets the validity end and the TTL an Extend applied, unless
// the lock already ended.
func (l *Lease) moveDeadline(until time.Time, ttl time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || !l.timer.Stop() {
		return false // the old deadline fired, or is firing: Done is closed
	}
	if ttl != l.ttl {
		l.signalMoved()
	}
	l.until, l.ttl = until, ttl
	l.timer = l.e.Clock.AfterFunc(l.doneIn(until, ttl), l.closeDone)
	return true
}

// pullDeadline moves the validity end back to until, if that is earlier,
// unless the lock already ended. The TTL last applied stays: the next
// Extend re-applies it. The keep-alive is told: its next extension must
// come before the nearer end.
func (l *Lease) pullDeadline(until time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || !until.Before(l.until) || !l.timer.Stop() {
		return
	}
	l.until = until
	l.timer = l.e.Clock.AfterFunc(l.doneIn(until, ttl), l.closeDone)
	l.signalMoved()
}

// signalMoved tells Do's keep-alive that the TTL or the validity moved.
func (l *Lease) signalMoved() {
	select {
	case l.ttlMoved <- struct{}{}:
	default: // one pending is enough: the keep-alive reads both
	}
}

// extendOp is Extend's call on one node, applying ls's TTL, recorded as
// unheard until its reply comes (unheard.go).
func (l *Lease) extendOp(ls Term) round.NodeOp {
	op := l.extendCall(ls)
	n := len(l.e.Nodes)
	return func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		if err := ctx.Err(); err != nil {
			return round.NodeTimedOut, 0, err // nothing sent, nothing to land
		}
		heard := l.unheard.count(n, i, ls.TTL)
		start := time.Now()
		o, v, err := op(ctx, i, node)
		heard(l.e.Nodes[i], o, err, time.Since(start))
		return o, v, err
	}
}

// extendCall is extendOp's call. A fenced lease counts each member once,
// by the id the node answers with (identity.View): an address swapped while the
// lease is held must not count one server twice.
func (l *Lease) extendCall(ls Term) round.NodeOp {
	e := l.e
	call := l.shape.Extend(l, ls.Arg)
	if !e.Fencing {
		return func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
			return Answer(ctx, call, node)
		}
	}
	var mu sync.Mutex
	counted := map[int64]int{} // id -> the node it was counted for
	return func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		vals, err := call.Run(ctx, node).Int64Slice()
		switch {
		case err != nil:
			return round.NodeFailed, 0, err
		case len(vals) != 2:
			return round.NodeFailed, 0, fmt.Errorf("redlock: unexpected reply %v", vals)
		case vals[0] != 1:
			return round.NodeRefused, 0, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if j, dup := counted[vals[1]]; vals[1] < 0 || dup && j != i || l.list.IDs[i] >= 0 && int64(l.list.IDs[i]) != vals[1] {
			e.Deployment.Recheck()
			return round.NodeFailed, 0, errNotChecked
		}
		counted[vals[1]] = i
		return round.NodeGranted, 0, nil
	}
}
