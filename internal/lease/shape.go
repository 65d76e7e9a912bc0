package lease

import "github.com/quorumlock/redlock/internal/nodescript"

// Shape is what a primitive puts on each node for one lease: the script
// call of each step, with its keys. The engine runs the steps and reads
// their replies, so a primitive's scripts answer as the mutex's do:
//
//   - Acquire: 1 granted, 0 refused, 2 refused because the free lock is
//     promised to another waiter; fenced, {status, candidate} with the
//     identity checks' negative statuses (lua/fenced_acquire.lua);
//   - Commit: {H, id} or {-1, stamp} / {-3, 0} (lua/commit.lua);
//   - Release: 1 deleted, 0 not held by this value (lua/release.lua);
//   - Extend: 1 extended, 0 not held; fenced, {status, id}
//     (lua/fenced_extend.lua).
//
// Every key a call touches must be in its KEYS and share the lease's hash
// tag, so that a Redis Cluster can stand as one node; the per-node fencing
// keys (nodescript.NodeKeys) carry none.
type Shape interface {
	// Acquire is round 1 for l, whose waiter has waited waitedUs.
	Acquire(l *Lease, waitedUs int64) *nodescript.Call
	// Commit is round 2: commit token for l's name.
	Commit(l *Lease, token int64) *nodescript.Call
	// Release deletes l where it still holds l's value. markerTTL (ms, or
	// 0 for none) is how long a marker keeps a late acquisition of the
	// value from landing; announce tells waiters (an Unlock, not a
	// rollback).
	Release(l *Lease, markerTTL any, announce bool) *nodescript.Call
	// Extend re-applies a TTL of ttlArg ms where l still holds its value.
	Extend(l *Lease, ttlArg any) *nodescript.Call
}
