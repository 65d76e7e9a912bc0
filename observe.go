package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/round"
)

// An Observer is told how every lock operation went: its per-node outcome
// vector and its timings. Use it for metrics and traces; the redlockotel
// module adapts it to OpenTelemetry.
//
// Observe runs on the caller's goroutine, once the operation is decided and
// before the call returns, so it must be quick and must not block: hand the
// event to a metrics library, do not make a network call. It may be called
// from many goroutines at once. The client does not change an Event's
// slices after delivering it, and neither may the observer: they may be
// shared with the returned Lock or error.
type Observer interface {
	Observe(ctx context.Context, ev Event)
}

// ObserverFunc lets an ordinary function be an Observer.
type ObserverFunc func(ctx context.Context, ev Event)

// Observe calls f(ctx, ev).
func (f ObserverFunc) Observe(ctx context.Context, ev Event) { f(ctx, ev) }

// WithObserver reports every acquisition attempt, extension and unlock to o.
// Without it, the client builds no events at all.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// Event describes one operation on the quorum. An acquisition attempt is one
// event: Lock and Do, which retry, report every attempt.
type Event struct {
	Op    string // "lock", "extend" or "unlock"
	Name  string // the lock name
	Start time.Time
	// Elapsed is the time from the start until the outcome was decided (on
	// the client's monotonic clock), including the commit round of a fenced
	// acquisition.
	Elapsed time.Duration
	// Nodes is the outcome of each node in the first (or only) round, in the
	// order given to New. Latency is each node's time to answer.
	Nodes []NodeResult
	// Commit is the outcome of each node in round 2 of a fenced
	// acquisition (the token commit), if the attempt got that far. A
	// mutex's commit asks a majority first (docs/fencing.md, step 2): a
	// node it did not need to ask is NodeNoReply.
	Commit []NodeResult
	// Token is the fencing token of a successful fenced acquisition.
	Token uint64
	// Validity is how long the lock is valid from now on, for a successful
	// acquisition or extension.
	Validity time.Duration
	// Err is nil on success, and otherwise the error the call returns (a
	// *QuorumError, or ErrClosed).
	Err error
}

// observe builds and delivers an event, if anyone listens.
func (c *Client) observe(ctx context.Context, op, name string, start time.Time, nodes, commit []NodeResult,
	token uint64, until time.Time, err error) {
	if c.cfg.observer == nil {
		return
	}
	now := c.cfg.clock.Now()
	ev := Event{Op: op, Name: name, Start: start, Elapsed: now.Sub(start), Nodes: nodes, Commit: commit,
		Token: token, Err: err}
	if err == nil && !until.IsZero() {
		ev.Validity = until.Sub(now)
	}
	c.cfg.observer.Observe(ctx, ev)
}

// Trace holds callbacks at the points of the lock protocol, in the style of
// net/http/httptrace: for debugging, for tests that must stop the protocol
// at an exact point (between the rounds, before a subscription), and for
// fault injection in outside test suites. Set it with WithTrace. Any field
// may be nil; a nil field, and a client without a Trace, costs nothing.
//
// Every callback is synchronous: the protocol waits for it to return before
// it goes on, on the goroutine that reached the point. That is what lets a
// test hold the protocol at a point; a callback that blocks holds up that
// operation (and, for the per-node callbacks, that node's part of it) as a
// slow node would, with the same timeouts. Callbacks may run on many
// goroutines at once, and must not call back into the same operation.
// So that they can, a client with a Trace gives each node's call a
// goroutine of its own; without one, a call that waits for its node's
// next pipeline rides it without one (docs/design.md, acquisition step 2),
// which costs less CPU under load.
//
// op, where given, names the round: "lock" (round 1 of an acquisition),
// "commit" (round 2 of a fenced one), "extend", "unlock", "leave" (a waiter
// gives up its place in the queue), "yield" (a waiter gives back a promise
// it could not use) or "admin" (provisioning, repair and
// NodeIDs reading or writing the nodes' fencing state).
type Trace struct {
	// AttemptStart is called when an acquisition attempt of name starts,
	// before anything is sent: once per TryLock, and once per attempt of
	// Lock and Do, that got past the wait for this client's own releases
	// of the name and the check of the node list (an attempt that fails
	// there sends nothing, and is not reported to the Observer either).
	AttemptStart func(name string)
	// NodeCall is called on the node's goroutine just before a call of the
	// round op is sent to node (an index into the nodes given to New). A
	// node skipped as hung is not sent the call, and not reported.
	NodeCall func(op string, node int)
	// NodeReply is called on the node's goroutine once node has answered a
	// call of the round op, or its call has failed or timed out; r.Outcome
	// is never NodeNoReply.
	NodeReply func(op string, node int, r NodeResult)
	// RoundTwo is called when round 1 of a fenced acquisition of name was
	// won with the fencing token candidate token, just before round 2 (the
	// commit) goes out. The validity runs meanwhile: it counts from the
	// start of the attempt.
	RoundTwo func(name string, token uint64)
	// Subscribe is called on the node's subscriber goroutine just before a
	// subscription to release notifications (for Lock's waiters) is sent
	// to node.
	Subscribe func(node int)
}

// WithTrace calls t's callbacks at the protocol's points of every
// operation of the client (see Trace). The client keeps t; its fields must
// not change afterwards.
func WithTrace(t *Trace) Option { return func(c *config) { c.trace = t } }

// traceSubscribe hands t's Subscribe to the queue's subscribers
// (internal/fairqueue), read at each subscription as traceHooks' are.
func traceSubscribe(t *Trace) func(node int) {
	if t == nil {
		return nil
	}
	return func(node int) {
		if t.Subscribe != nil {
			t.Subscribe(node)
		}
	}
}

// traceHooks hands t's node callbacks to the round engine. They are read
// at each call, as a Trace's fields may be: nil t costs nothing.
func traceHooks(t *Trace) round.Hooks {
	if t == nil {
		return round.Hooks{}
	}
	return round.Hooks{
		NodeCall: func(op string, node int) {
			if t.NodeCall != nil {
				t.NodeCall(op, node)
			}
		},
		NodeReply: func(op string, node int, r NodeResult) {
			if t.NodeReply != nil {
				t.NodeReply(op, node, r)
			}
		},
	}
}

// leaseHooks hands t's lease callbacks to the lease engine, read at each
// call, as a Trace's fields may be.
func leaseHooks(t *Trace) lease.Hooks {
	if t == nil {
		return lease.Hooks{}
	}
	return lease.Hooks{
		AttemptStart: func(name string) {
			if t.AttemptStart != nil {
				t.AttemptStart(name)
			}
		},
		RoundTwo: func(name string, token uint64) {
			if t.RoundTwo != nil {
				t.RoundTwo(name, token)
			}
		},
	}
}
