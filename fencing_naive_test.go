package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// The broken token schemes of docs/fencing.md, for the tests that must show
// their checks can fail. They compose the protocol's pieces (round 1, the
// commit round, the validity) differently from (*lease.Lease).Grant, which knows
// nothing of them, and are injected from here (Naive): production code has
// no hook for them.
type NaiveVariant uint8

const (
	NaiveNoCommit      NaiveVariant = iota + 1 // counterexample 1: max of round-1 candidates, no round 2
	NaiveEarlyValidity                         // counterexample 2: validity checked after round 1; no abort rule
	NaiveNoAbort                               // counterexample 3: validity after round 2, but no abort rule
)

// Naive acquires locks through Client by the broken scheme Variant: round 1
// as TryLock sends it, then naiveGrant in place of (*lease.Lease).Grant. It skips
// the Trace and Observer reports of an attempt, which no naive test uses.
// Its Lock satisfies chaos.Locker, for the harness's calibration.
type Naive struct {
	Client  *Client
	Variant NaiveVariant
}

// TryLock is one attempt by the scheme, like (*Client).TryLock.
func (n Naive) TryLock(ctx context.Context, name string, _ ...LockOption) (*Lock, error) {
	c := n.Client
	if err := c.beforeTry(ctx, name); err != nil {
		return nil, err
	}
	list, err := c.ident.AttemptList(ctx, name)
	if err != nil {
		return nil, err
	}
	ls := c.defaultLease()
	lk := &Lock{c: c}
	l := &lk.l
	c.leases.Begin(l, lease.Request{Name: name, Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, List: list,
		Prefix: c.cfg.keyPrefix, Shape: lease.Mutex})
	start := c.cfg.clock.Now()
	t, ctxErr := l.RoundOne(ctx, 0)
	if t == nil {
		return nil, ctxErr // closed
	}
	var commit []NodeResult
	var kind, cause error
	if ctxErr == nil && t.Won() {
		if commit, kind, cause = naiveGrant(ctx, c, l, n.Variant, start, t); kind == nil && cause == nil {
			return lk, nil
		}
	}
	return nil, publicError(l.Fail(t, ctxErr, commit, kind, cause))
}

// Lock retries TryLock, a retry delay apart, until it succeeds, fails with
// an error no retry fixes, or ctx ends. Unlike (*Client).Lock it does not
// queue: the calibration needs the broken tokens, not fairness.
func (n Naive) Lock(ctx context.Context, name string) (*Lock, error) {
	for {
		l, err := n.TryLock(ctx, name)
		var qe *QuorumError
		if err == nil || !errors.As(err, &qe) || qe.Cause != nil || verdict.Final(qe.Kind) {
			return l, err
		}
		t := time.NewTimer(n.Client.cfg.retryDelayMin)
		select {
		case <-ctx.Done():
			t.Stop()
			qe.Cause = ctx.Err()
			return nil, qe
		case <-t.C:
		}
	}
}

// naiveGrant is the lease engine's Grant by the scheme v.
func naiveGrant(ctx context.Context, c *Client, l *lease.Lease, v NaiveVariant, start time.Time, t *round.Tally) (commit []NodeResult, kind, cause error) {
	if !c.cfg.fencing {
		return l.Grant(ctx, start, t)
	}
	until := start.Add(c.cfg.ttl - c.cfg.drift())
	validity := func() time.Duration { return until.Sub(c.cfg.clock.Now()) }
	token := t.Best
	if v == NaiveEarlyValidity && validity() <= 0 {
		return nil, ErrNoValidity, nil
	}
	if v != NaiveNoCommit {
		commit, kind, cause = l.CommitRound(ctx, token, commitWithoutAbort(l, token), nil, nil, time.Time{})
		if kind != nil || cause != nil {
			return commit, kind, cause
		}
	}
	if v != NaiveEarlyValidity && validity() <= 0 { // (2) checked it before round 2 only
		return commit, ErrNoValidity, nil
	}
	l.Acquired(uint64(token), t.Snapshot(), until)
	return commit, nil, nil
}

// commitWithoutAbort is round 2 on one node with no abort rule: a newer
// token committed there does not stop the acquisition.
func commitWithoutAbort(l *lease.Lease, token int64) round.NodeOp {
	call := l.Shape().Commit(l, token)
	return func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		h, o, err := l.CommitOn(ctx, call, i, node)
		return o, h, err
	}
}
