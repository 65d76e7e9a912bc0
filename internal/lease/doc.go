// Package lease is the lease engine: one lease on a majority of the nodes,
// from its acquisition to its release, whatever a primitive puts on each
// node.
//
// An acquisition is round 1 (the primitive's acquisition script; fenced, it
// also proposes token candidates) and, with fencing, round 2, which commits
// the largest candidate on a majority (docs/fencing.md). A lease won is
// valid until start + TTL - drift on the client's monotonic clock, and its
// Done closes a margin before that. A lease lost is rolled back on every
// node, each rollback after the call it undoes, with release markers
// against calls still in flight. Extend re-applies a TTL on a majority;
// Release deletes the lease and settles: this client's next attempt on the
// name sends each node's call after the release's call there.
//
// A primitive says what goes on each node through a Shape: the scripts and
// keys of each step. The mutex is the first (mutex.go).
//
// The package imports internal/identity (which votes an attempt counts: the
// check of the node list), internal/round (the rounds), internal/nodescript
// (the scripts), internal/verdict (a failed operation's Failure) and
// internal/kind (the failure kinds); never the root package, which builds
// its public errors from a verdict.Failure.
package lease
