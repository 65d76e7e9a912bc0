package redlock

import (
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/round"
)

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
