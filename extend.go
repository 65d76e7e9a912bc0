package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Extend re-applies the lock's TTL on every node that still holds this
// lock's value: the TTL it was acquired with (For, or the client's), or the
// one the last successful Extend applied. With For it applies that TTL
// instead, from now, and keeps it for later extensions: a shorter one
// shortens the lock. It succeeds only if a majority extended it within the
// validity; Until then becomes the start of the call + TTL - drift, earlier
// than before if the TTL was shortened enough. It never re-creates an
// expired key, and it fails with ErrExpired once Done has closed. An
// invalid For is refused as TryLock refuses it, before anything is sent,
// and leaves the lock as it was. It waits for a majority up to the round's
// patience (see WithNodeTimeout), or until ctx ends: the error is then a
// *QuorumError of Kind ErrUnavailable (ErrExpired if a majority refused)
// with ctx's error as its Cause and every node's outcome, the silent ones
// NodeTimedOut with an Err that wraps ctx's error.
//
// An Extend that shortens the TTL and fails may still have shortened it
// on some nodes (those it reached, or that ran it after it gave up on
// them): Until then moves back to where a success would have put it, if
// that is earlier, and Done closes by it.
//
// Once Unlock has begun on this Lock, Extend fails with ErrReleased, also
// when the Unlock began while the extension was in flight and took the
// keys from under it (the Extend then waits for that Unlock's outcome):
// ErrExpired means the lock ran out while held, never that this handle
// released it. An extension refused while an Unlock that itself found
// the lock gone (ErrExpired) was under way is ErrExpired, not ErrReleased:
// another holder may have had it.
//
// Extends of one Lock run one at a time, in the order they get their
// turn (a call waiting for its turn gives up when ctx ends, with a
// *QuorumError of Kind ErrUnavailable): two in flight with different TTLs
// could leave each node with the TTL it ran last and Until with the one
// decided last, a minute ahead of keys that expire in seconds.
func (l *Lock) Extend(ctx context.Context, opts ...LockOption) error {
	select {
	case l.extending <- struct{}{}:
		defer func() { <-l.extending }()
	case <-ctx.Done():
		return &QuorumError{Op: "extend", Name: l.name, Kind: ErrUnavailable, Cause: ctx.Err()}
	}
	ls := lease{ttl: l.currentTTL()}
	if len(opts) > 0 {
		var err error
		if ls, err = l.c.leaseOf(ls, opts); err != nil {
			return err
		}
	} else {
		ls.arg = ls.ttl.Milliseconds()
	}
	start := l.c.cfg.clock.Now()
	until, nodes, err := l.extend(ctx, start, ls)
	if err != nil && ls.ttl < l.currentTTL() {
		// Nodes it reached, late or unheard, hold the shorter TTL: the
		// lock is valid no longer than if it had succeeded.
		l.pullDeadline(start.Add(l.c.cfg.validity(ls.ttl)), ls.ttl)
	}
	if err != nil && !errors.Is(err, ErrReleased) {
		l.c.log.Warn("redlock: extension failed", "lock", l.name, "err", err)
	}
	l.c.observe(ctx, "extend", l.name, start, nodes, nil, l.token, until, err)
	return err
}

// extend returns the new end of the validity, and what each node answered.
func (l *Lock) extend(ctx context.Context, start time.Time, ls lease) (until time.Time, nodes []NodeResult, err error) {
	qe := &QuorumError{Op: "extend", Name: l.name}
	released := l.isReleased()
	select {
	case <-l.done:
		qe.Kind = ErrExpired
		if released {
			qe.Kind = ErrReleased
		}
		return time.Time{}, nil, qe
	default:
	}
	c := l.c
	op := l.extendOp(ls)
	// Until a majority extends the lock, or so many refuse that it is gone
	// (ErrExpired) rather than unheard of (ErrUnavailable).
	t, err := c.rounds.Run(ctx, round.Spec{Name: "extend", Op: op}, (*round.Tally).WonOrRefused, nil)
	if t == nil {
		return time.Time{}, nil, err
	}
	if qe.Cause = err; qe.Cause == nil && t.Won() {
		until = start.Add(c.cfg.validity(ls.ttl)) // as in grant
		if until.After(c.cfg.clock.Now()) && l.moveDeadline(until, ls.ttl) {
			if c.cfg.observer != nil {
				nodes = t.Snapshot()
			}
			return until, nodes, nil
		}
		qe.Kind = ErrExpired
	}
	// A round already lost when ctx ended still says why it was lost.
	if qe.Kind == nil && (qe.Cause == nil || t.Lost()) {
		qe.Kind = ErrUnavailable
		if t.RefusedByMajority() {
			qe.Kind = ErrExpired
		}
	}
	if qe.Kind != nil && l.isReleased() && l.unlocked() {
		// This handle's Unlock began before the outcome was decided, and
		// deleted the lock on a majority: it, not an expiry, took the keys
		// (or keeps the new deadline from being set). An Unlock that found
		// the lock gone (ErrExpired) says the extension's refusals are an
		// expiry's, or another holder's, and they are reported as such.
		qe.Kind = ErrReleased
	}
	qe.Nodes = t.Snapshot()
	return time.Time{}, qe.Nodes, qe
}

// unlocked waits for the Unlock that has begun on l to decide, and tells
// whether it deleted the lock on a majority.
func (l *Lock) unlocked() bool {
	l.unlockOnce.Do(func() {}) // returns once the running Unlock has
	return l.unlockErr == nil
}

// isReleased tells whether Unlock has begun on l.
func (l *Lock) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// moveDeadline sets the validity end and the TTL an Extend applied, unless
// the lock already ended.
func (l *Lock) moveDeadline(until time.Time, ttl time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || !l.timer.Stop() {
		return false // the old deadline fired, or is firing: Done is closed
	}
	if ttl != l.ttl {
		select {
		case l.ttlMoved <- struct{}{}:
		default: // one pending is enough: the keep-alive reads the TTL
		}
	}
	l.until, l.ttl = until, ttl
	l.timer = l.c.cfg.clock.AfterFunc(l.doneIn(until, ttl), l.closeDone)
	return true
}

// pullDeadline moves the validity end back to until, if that is earlier,
// unless the lock already ended. The TTL last applied stays: the next
// Extend re-applies it.
func (l *Lock) pullDeadline(until time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || !until.Before(l.until) || !l.timer.Stop() {
		return
	}
	l.until = until
	l.timer = l.c.cfg.clock.AfterFunc(l.doneIn(until, ttl), l.closeDone)
}

// extendOp is Extend's call on one node, applying ls's TTL. A fenced lock's counts each
// member once, by the id the node answers with (nodelist.go): an address
// swapped while the lock is held must not count one server twice.
func (l *Lock) extendOp(ls lease) round.NodeOp {
	c := l.c
	if !c.cfg.fencing {
		call := nodescript.NewCall(nodescript.Extend, l.keyArgs[:1], l.valueArg, ls.arg)
		return func(ctx context.Context, _ int, node redis.UniversalClient) (Outcome, int64, error) {
			return answer(ctx, call, node)
		}
	}
	call := nodescript.NewCall(nodescript.FencedExtend, []any{l.keyArgs[0], c.keys.id, c.keys.maxTTL}, l.valueArg, ls.arg)
	var mu sync.Mutex
	counted := map[int64]int{} // id -> the node it was counted for
	return func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		vals, err := call.Run(ctx, node).Int64Slice()
		switch {
		case err != nil:
			return NodeFailed, 0, err
		case len(vals) != 2:
			return NodeFailed, 0, fmt.Errorf("redlock: unexpected reply %v", vals)
		case vals[0] != 1:
			return NodeRefused, 0, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if j, dup := counted[vals[1]]; vals[1] < 0 || dup && j != i || l.list.ids[i] >= 0 && int64(l.list.ids[i]) != vals[1] {
			c.checkList(false)
			return NodeFailed, 0, errNotChecked
		}
		counted[vals[1]] = i
		return NodeGranted, 0, nil
	}
}
