package redlock

import (
	"context"
	"time"
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
	// acquisition (the token commit), if the attempt got that far.
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
