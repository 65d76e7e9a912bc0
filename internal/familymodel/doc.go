// Package familymodel is an exhaustive model checker for the lock family's
// fenced scripts over a quorum (docs/rwlock.md, multilock.md,
// semaphore.md), in plain Go: no Redis. internal/protomodel models the
// mutex's acquisition, repair and reprovision in depth; this package
// models what the family adds on top of them.
//
// The model (node.go): three nodes, whose scripts are atomic transitions:
// the read-write lock's write and read acquisitions (rw_write_block.lua
// before fenced_acquire.lua; rw_read.lua) and their commits
// (rw_write_commit.lua with the readers' mark HR; rw_read_commit.lua), the
// multi-lock's all-or-nothing take and its commit of every member's H
// (multi_fenced_acquire.lua, multi_commit.lua), the mutex's beside it, the
// semaphore's slot take under the versioned size (permits.lua) and
// SetPermits' conditional write (setpermits.lua), releases with their
// markers; wipes, after which a fenced node is amnesiac until a repair (at
// least a TTL later, with a majority intact) raises its floor E above the
// counters of the others, and a semaphore's node is down for a TTL and
// comes back empty; the retention passing (H, HR and E expire), at a
// moment when no attempt is under way. Clients (apply.go) make attempts
// whose every call is an event of its own that may land late, after its
// round was decided; each decision is an event, so a client pauses
// wherever it waits; a discrete clock advances by ticks. Left out, because
// they only refuse more: the waiting lines, promises and reader phases
// (internal/waitmodel models the multi-lock's line), and the node's roster
// and replication id (protomodel's). Left out, and narrower than the
// library: each call lands once (no go-redis retry copies), before the
// client's next attempt begins (a release's retries can land after it),
// and markers never expire (each of those only leaves an entry nobody
// holds: liveness); Extend, Downgrade and the fenced semaphore's tokens
// are not modelled.
//
// Properties, checked after every event (apply.go):
//   - Lease: no two conflicting holds (writer and writer, writer and
//     reader, a multi-lock and a lock of a member, two holds of one slot)
//     within their validity;
//   - U: no token returned twice;
//   - M1: a token exceeds every conflicting token returned before its
//     attempt began (docs/fencing.md's property, for the family);
//   - Order: a token exceeds every conflicting token that a majority of
//     the nodes held when its commit round began (what H, HR and the
//     multi-lock's every-member check give);
//   - Permits: once SetPermits returned, from one TTL later and while a
//     majority of the nodes keeps its write (not wiped since), at most the
//     new size is held.
//
// Rules selects the scripts' rules (Library) or a variant with one removed
// (Broken); model_test.go shows each variant found broken and the
// library's rules holding within the bounds, and reports the states and
// depth. The search (explore.go) is breadth first (a shortest trace) or
// depth first; a state is identified by a 128-bit hash (internal/hashset).
// `make model-deep` searches larger bounds (TestDeep).
package familymodel
