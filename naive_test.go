package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The broken token schemes of docs/fencing.md, for the tests that must show
// their checks can fail. They compose the protocol's pieces (round 1, the
// commit round, the validity) differently from (*Lock).grant, which knows
// nothing of them.
type NaiveVariant uint8

const (
	NaiveNoCommit      NaiveVariant = iota + 1 // counterexample 1: max of round-1 candidates, no round 2
	NaiveEarlyValidity                         // counterexample 2: validity checked after round 1; no abort rule
	NaiveNoAbort                               // counterexample 3: validity after round 2, but no abort rule
)

// WithNaiveFencing makes a fenced client grant locks by the broken scheme v.
func WithNaiveFencing(v NaiveVariant) Option {
	return func(c *config) {
		c.grant = func(l *Lock, ctx context.Context, start time.Time, t *tally) ([]NodeResult, error, error) {
			return l.naiveGrant(ctx, v, start, t)
		}
	}
}

// naiveGrant is grant by the scheme v.
func (l *Lock) naiveGrant(ctx context.Context, v NaiveVariant, start time.Time, t *tally) (commit []NodeResult, kind, cause error) {
	c := l.c
	if !c.cfg.fencing {
		return l.grant(ctx, start, t)
	}
	until := start.Add(c.cfg.ttl - c.cfg.drift())
	validity := func() time.Duration { return until.Sub(c.cfg.clock.Now()) }
	token := t.best
	if v == NaiveEarlyValidity && validity() <= 0 {
		return nil, ErrNoValidity, nil
	}
	if v != NaiveNoCommit {
		commit, kind, cause = l.commitRound(ctx, token, l.commitWithoutAbort(token))
		if kind != nil || cause != nil {
			return commit, kind, cause
		}
	}
	if v != NaiveEarlyValidity && validity() <= 0 { // (2) checked it before round 2 only
		return commit, ErrNoValidity, nil
	}
	l.token = uint64(token)
	l.acquired(t.snapshot(), until)
	return commit, nil, nil
}

// commitWithoutAbort is round 2 on one node with no abort rule: a newer
// token committed there does not stop the acquisition.
func (l *Lock) commitWithoutAbort(token int64) nodeOp {
	call := l.commitCall(token)
	return func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		h, err := call.run(ctx, node).Int64()
		switch {
		case err != nil:
			return NodeFailed, 0, err
		case h == -1:
			l.c.noteAmnesia(i)
			return NodeAmnesiac, 0, ErrAmnesia
		default:
			return NodeGranted, h, nil
		}
	}
}
