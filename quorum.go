package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/quorumlock/redlock/internal/waiting"
)

// The quorum, as a caller sees it. Every operation goes to all N nodes
// given to New at once, each call bounded by the node timeout, and
// succeeds when a majority (N/2 + 1) of them did what was asked: any two
// majorities share a node, where one script decided atomically, so two
// owners never both hold a majority within their validity. When an
// operation fails, its error is a *QuorumError: what failed (Kind, one of
// the errors in errors.go), the caller's context error if that ended it
// (Cause), and each node's answer (Nodes: an Outcome, an error, a
// latency). docs/design.md states the rule for each operation.

// QuorumError reports a failed operation on the quorum: what failed (Kind,
// one of the errors above), the caller's context error if that ended the
// operation (Cause), and what each node answered.
//
// errors.Is matches both Kind and Cause, so
//
//	errors.Is(err, redlock.ErrLocked)
//	errors.Is(err, context.Canceled)
//
// both work on the same error.
type QuorumError struct {
	Op    string // "lock", "extend" or "unlock"
	Name  string // the lock name
	Kind  error
	Cause error        // context error that cut the operation short, or nil
	Nodes []NodeResult // one per node, in the order given to New
	// GaveUpAfter is set when Lock gave up because its attempts had
	// failed, for other reasons than contention, for that long
	// (WithMaxOutage); Nodes are then the last attempt's. It is 0 otherwise.
	GaveUpAfter time.Duration

	// lostToPromises: an attempt of Lock lost only to promises made to
	// other waiters (see fairqueue.Queue.Yield).
	lostToPromises bool
	// promised: how many nodes refused the attempt while free, promised to
	// others (a semaphore's line).
	promised int
	// after: per node, closed once the failed attempt's call there ended
	// (Lock's leave goes after it); own: this client had a release or
	// rollback of the name in flight, so its refusals may be its own.
	after []chan struct{}
	own   bool
}

// publicError turns the lease engine's *verdict.Failure into a *QuorumError;
// any other error, and nil, stay as they are.
func publicError(err error) error {
	f, ok := err.(*verdict.Failure)
	if !ok {
		return err
	}
	return &QuorumError{Op: f.Op, Name: f.Name, Kind: f.Kind, Cause: f.Cause, Nodes: f.Nodes,
		lostToPromises: f.LostToPromises, promised: f.Promised, after: f.After, own: f.Own}
}

// quorumError is the *QuorumError of f, for internal/identity.
func quorumError(f *verdict.Failure) error { return publicError(f) }

// ended is the error of a Lock whose ctx ended after attempt e: e, with
// ctx's error as its cause. Refusals that may have come from this client's
// own release or rollback of the name, still in flight, are no evidence of
// another owner: such an attempt does not say ErrLocked.
func (e *QuorumError) ended(ctx context.Context) *QuorumError {
	e.Cause = ctx.Err()
	if e.own && e.Kind == ErrLocked {
		e.Kind = nil
	}
	return e
}

// failedAttempt is a *QuorumError as a waiting loop reads it
// (internal/waiting).
type failedAttempt struct{ e *QuorumError }

// asFailed views err as a failed attempt, if it is a *QuorumError.
func asFailed(err error) (waiting.Failed, bool) {
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return nil, false
	}
	return failedAttempt{qe}, true
}

// notTried is the error of a waiting call whose ctx ended before its first
// attempt.
func notTried(name string, cause error) error {
	return &QuorumError{Op: "lock", Name: name, Cause: cause}
}

func (f failedAttempt) Error() string                   { return f.e.Error() }
func (f failedAttempt) Err() error                      { return f.e }
func (f failedAttempt) Name() string                    { return f.e.Name }
func (f failedAttempt) After() []chan struct{}          { return f.e.after }
func (f failedAttempt) Unanswered() bool                { return f.e.Cause != nil && f.e.Kind == nil }
func (f failedAttempt) Over() bool                      { return f.e.Cause != nil || verdict.Final(f.e.Kind) }
func (f failedAttempt) Contended() bool                 { return contended(f.e) }
func (f failedAttempt) LostToPromises() bool            { return f.e.lostToPromises }
func (f failedAttempt) SplitVote() bool                 { return splitVote(f.e.Nodes) }
func (f failedAttempt) Ended(ctx context.Context) error { return f.e.ended(ctx) }
func (f failedAttempt) GaveUp(lasted time.Duration) error {
	f.e.GaveUpAfter = lasted
	return f.e
}

// contended reports an attempt lost to other owners (the lock held, or
// promised to other waiters, or a newer token committed meanwhile) rather
// than to nodes that failed or did not answer: Lock waits out contention
// until ctx ends, but not an outage (WithMaxOutage).
func contended(qe *QuorumError) bool {
	return qe.Kind == ErrLocked || qe.Kind == ErrSuperseded || qe.lostToPromises
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

func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s", e.Op)
	if e.Name != "" {
		fmt.Fprintf(&b, " %q", e.Name)
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Kind.Error(), "redlock: "))
		if e.Kind == ErrLocked && e.promised > 0 {
			// Inspect shows such a name free: say why it was refused.
			fmt.Fprintf(&b, " (free on %d node(s) but promised to a waiting caller)", e.promised)
		}
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	if e.GaveUpAfter > 0 {
		fmt.Fprintf(&b, ": gave up after %v of failed attempts (WithMaxOutage)", e.GaveUpAfter.Round(time.Millisecond))
	}
	if len(e.Nodes) > 0 {
		b.WriteString(" [")
		b.WriteString(verdict.Summarize(e.Nodes))
		b.WriteString("]")
	}
	return b.String()
}

// Unwrap exposes Kind, Cause and the typed refusals of the nodes that
// decided the Kind (a *PermitsError, a *WrongTypeError) to errors.Is and
// errors.As.
func (e *QuorumError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	// The typed refusal that decided the Kind, so that errors.As reaches
	// the *PermitsError of an ErrPermits, or the *WrongTypeError of an
	// ErrWrongType, on what the call returned: the first node's (the nodes
	// say the same). Only then: a minority that stores another size, in
	// an outage or under contention, must not make errors.Is(err,
	// ErrPermits) true.
	for _, n := range e.Nodes {
		var pe *PermitsError
		var we *WrongTypeError
		switch {
		case n.Err == nil:
		case e.Kind == ErrPermits && errors.As(n.Err, &pe):
			return append(errs, pe)
		case e.Kind == ErrWrongType && errors.As(n.Err, &we):
			return append(errs, we)
		}
	}
	return errs
}

// Outcome is what one node answered to one call.
type Outcome = round.Outcome

const (
	// NodeNoReply: the operation was decided before this node answered. Its
	// call goes on in the background until the node timeout.
	NodeNoReply = round.NodeNoReply
	// NodeGranted: the node did what was asked (set the lock, extended it,
	// deleted it, committed the token).
	NodeGranted = round.NodeGranted
	// NodeRefused: the node answered no. For a lock, another owner holds the
	// key; for Extend and Unlock, the key no longer holds this owner's value.
	NodeRefused = round.NodeRefused
	// NodeFailed: the call returned an error other than a timeout, or the
	// node could not be reached (its last dial failed, say with "connection
	// refused"). Err says why.
	NodeFailed = round.NodeFailed
	// NodeTimedOut: the node did not answer within the node timeout, or
	// before the caller's ctx ended (its Err then wraps ctx's error).
	NodeTimedOut = round.NodeTimedOut
	// NodeAmnesiac: the node has lost its fencing state (its node-id marker
	// is gone) and is left out of quorums until it is repaired.
	NodeAmnesiac = round.NodeAmnesiac
)

// NodeResult is one node's part in an operation: Node, the index into the
// nodes given to New; its Outcome; Err, set for NodeFailed (the node's own
// error) and NodeTimedOut; and Latency, the time to the reply (zero for
// NodeNoReply).
type NodeResult = round.NodeResult
