package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// A leader election over the quorum (docs/election.md). An election is the
// mutex of its name: a candidate waits in the lock's fair queue, and the
// leader holds the lock, kept extended, until it resigns or cannot keep
// it. Its term is the lock's fencing token, minted by the quorum: strictly
// greater than every earlier leader's, so that storage fenced with terms
// refuses a deposed leader's writes. The leader's published value sits
// beside the lock key on each node, written only where the leader holds
// the lock.

// Election is the leader election called name. It holds no state of its
// own: any number of Election values, in any process, for the same name
// share it. It is the mutex of that name: a Lock of the same name competes
// with its candidates.
type Election struct {
	c    *Client
	name string
}

// Election returns the election called name, checked as a lock name is
// (ErrEmptyName, ErrNameTooLong, ErrBadName). It sends nothing.
func (c *Client) Election(name string) (*Election, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	return &Election{c: c, name: name}, nil
}

// Name is the election's name.
func (e *Election) Name() string { return e.name }

// valueKey is the hash of the leader's published value, beside the lock
// key (same hash tag).
func (e *Election) valueKey() string { return e.c.lockKey(e.name) + ":leader" }

// Leadership is one term of leadership, from Campaign to its end: Resign,
// or the lock lost (an extension that could not reach a majority in time).
// The lock is kept extended every TTL/3 meanwhile, as Do keeps its lock.
type Leadership struct {
	e      *Election
	l      *Lock
	ctx    context.Context // ends with the leadership, before its lease can pass
	cancel context.CancelCauseFunc
	stop   func() // the keep-alive's

	mu       sync.Mutex
	value    string // the latest value published on a majority
	pubSeq   int64  // its proclamation's number
	seq      int64  // the last number handed out
	resigned bool
}

// Campaign waits in the election's line until this candidate leads (as
// Lock waits: in arrival order, giving up as Lock does when ctx ends or
// the nodes stay unavailable), then publishes value on a majority and
// returns the Leadership. If the value cannot be published, it resigns and
// returns the error. Its errors are Lock's, and Proclaim's.
func (e *Election) Campaign(ctx context.Context, value string, opts ...LockOption) (*Leadership, error) {
	l, err := e.c.Lock(ctx, e.name, opts...)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	ld := &Leadership{e: e, l: l, ctx: lctx, cancel: cancel}
	ld.stop = l.lease().KeepAlive(lctx, cancel, ld.extend)
	if err := ld.Proclaim(ctx, value); err != nil {
		return nil, errors.Join(err, ld.Resign(context.WithoutCancel(ctx)))
	}
	return ld, nil
}

// extend is the keep-alive's extension: the lock's, then the published
// value again (same proclamation, so it cannot undo a newer Proclaim),
// which refreshes its lifetime and reaches the nodes that missed it.
func (ld *Leadership) extend(ctx context.Context) error {
	if err := ld.l.Extend(ctx); err != nil {
		return err
	}
	ld.mu.Lock()
	value, seq := ld.value, ld.pubSeq // not ld.seq: a Proclaim under way owns that number
	ld.mu.Unlock()
	_ = ld.publish(ctx, value, seq) // the next extension tries again
	return nil
}

// Term is the leadership's fencing token: pass it to the storage the
// leader writes, with every write.
func (ld *Leadership) Term() uint64 { return ld.l.Token() }

// Until is the end of the leadership's validity on the client's monotonic
// clock, as Lock.Until: the keep-alive moves it with every extension.
func (ld *Leadership) Until() time.Time { return ld.l.Until() }

// ID is the leadership's id: its lock's value, as Leader shows it.
func (ld *Leadership) ID() string { return ld.l.ID() }

// Value is the value last published (Campaign's, or Proclaim's).
func (ld *Leadership) Value() string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.value
}

// Done is closed when the leadership ends: resigned, or lost before its
// lease could pass (at Do's margin), so that work stopped on it has
// stopped in time. Context.Cause of Context's context says which
// (ErrResigned, ErrLockLost).
func (ld *Leadership) Done() <-chan struct{} { return ld.ctx.Done() }

// Context returns a context that ends when ctx does or when the
// leadership ends, with the leadership's cause: run the leader's work
// on it.
func (ld *Leadership) Context(ctx context.Context) context.Context {
	out, cancel := context.WithCancelCause(ctx)
	if ld.ctx.Err() != nil {
		cancel(context.Cause(ld.ctx)) // ended already: say so at once
		return out
	}
	stop := context.AfterFunc(ld.ctx, func() { cancel(context.Cause(ld.ctx)) })
	context.AfterFunc(out, func() { stop() })
	return out
}

// Proclaim publishes value as the leader's, without a new term: it is
// written on the nodes where this leadership holds the lock, and succeeds
// once a majority has it. After the leadership ended it fails with
// ErrNotLeader.
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	if ld.ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrNotLeader, context.Cause(ld.ctx))
	}
	ld.mu.Lock()
	ld.seq++
	seq := ld.seq
	ld.mu.Unlock()
	if err := ld.publish(ctx, value, seq); err != nil {
		return err
	}
	ld.mu.Lock()
	if seq > ld.pubSeq {
		ld.value, ld.pubSeq = value, seq
	}
	ld.mu.Unlock()
	return nil
}

// publish writes proclamation seq of value where this leadership holds
// the lock, for twice the lock's TTL (the keep-alive writes it again every
// extension), and succeeds on a majority. A node that has a later
// proclamation of this leadership keeps it and only renews its lifetime.
func (ld *Leadership) publish(ctx context.Context, value string, seq int64) error {
	c := ld.e.c
	life := 2 * ld.l.lease().TTL()
	call := nodescript.NewCall(nodescript.Proclaim, []any{c.lockKey(ld.e.name), ld.e.valueKey()},
		ld.ID(), seq, value, life.Milliseconds())
	op := func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		n, err := call.Run(ctx, node).Int64()
		switch {
		case err != nil:
			return NodeFailed, 0, wrongTypeOf(err)
		case n == 1:
			return NodeGranted, 0, nil
		}
		return NodeRefused, 0, nil
	}
	t, err := c.rounds.Run(ctx, round.Spec{Name: "proclaim", Op: op}, nil, nil)
	if t != nil && t.Won() {
		return nil
	}
	qe := &QuorumError{Op: "proclaim", Name: ld.e.name, Kind: ErrUnavailable, Cause: err}
	if t != nil {
		qe.Nodes = t.Snapshot()
		switch kind := verdict.BlockingKind(t); {
		case wrongTypeBlocks(t):
			qe.Kind = ErrWrongType
		case t.RefusedByMajority():
			qe.Kind = ErrNotLeader
		case kind != nil:
			qe.Kind = kind
		}
	}
	return qe
}

// Resign ends the leadership: the keep-alive stops, the leadership's
// context ends with ErrResigned, and the lock is released, which hands it
// to the next candidate in line at once. It returns Unlock's error
// (ErrExpired if the leadership had been lost); a second Resign returns
// nil.
func (ld *Leadership) Resign(ctx context.Context) error {
	ld.mu.Lock()
	again := ld.resigned
	ld.resigned = true
	ld.mu.Unlock()
	if again {
		return nil
	}
	ld.cancel(ErrResigned)
	ld.stop()
	return ld.l.Unlock(ctx)
}
