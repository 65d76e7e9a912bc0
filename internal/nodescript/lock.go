package nodescript

import (
	_ "embed"

	"github.com/quorumlock/redlock/internal/luascript"
)

// The scripts of a lock: round 1 (unfenced and fenced), round 2's commit,
// the release, the extension, the read-only inspection, and the queue's.

// Acquire sets the lock unless this value was already released here,
// or the lock is promised to another waiter.
//
//	KEYS[1] lock key, KEYS[2] release marker of this value,
//	KEYS[3..5] the queue: promise NEXT, QUEUE, SEEN
//	ARGV[1] value,    ARGV[2] TTL in ms, ARGV[3] waiter id (empty: none),
//	ARGV[4] STALE in ms, ARGV[5] WAITED in µs
//
// Without a waiter (TryLock) only KEYS[1..3] and ARGV[1..3] are passed.
//
// Returns 1 if the node now holds the value, 0 if another owner holds the
// key or it is promised to another waiter, and a WRONGTYPE error if the key
// is not a string.
//
// The release marker exists because a call that timed out may still be
// sitting in a paused node's socket buffer: when the node resumes it would set
// the lock for a fresh TTL after the release had already run.
var (
	//go:embed lua/acquire.lua
	acquireBody string
	Acquire     = luascript.New(`local NEXT, QUEUE, SEEN = KEYS[3], KEYS[4], KEYS[5]
local WAITER = ARGV[3]
` + QueuePrelude + acquireBody)
)

// FencedAcquire is round 1 of a fenced acquisition (lua/fenced_acquire.lua
// after the identity, wrong-type and queue preludes), and Commit round 2
// (lua/commit.lua): docs/fencing.md.
var (
	//go:embed lua/fenced_acquire.lua
	fencedAcquireBody string
	//go:embed lua/commit.lua
	commitBody string

	FencedAcquire = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY, ROSTERKEY = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local NONCE, ROSTER = ARGV[1], ARGV[6]
local NEXT, QUEUE, SEEN = KEYS[10], KEYS[11], KEYS[12]
local WAITER = ARGV[3]
` + IdentityPrelude + wrongTypePrelude + QueuePrelude + fencedAcquireBody)
	Commit = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY = KEYS[4], KEYS[5], KEYS[6]
local NONCE = ARGV[3]
` + IdentityPrelude + wrongTypePrelude + `local ID = nodeID()
if not ID then return {-1, 0} end
` + commitBody)
)

// Release deletes the lock if it still holds this value.
//
//	KEYS[1] lock key, KEYS[2] release marker of this value,
//	KEYS[3..5] the queue: promise NEXT, QUEUE, SEEN
//	ARGV[1] value,    ARGV[2] marker TTL in ms, or 0 for no marker
//	ARGV[3] 1 to announce the release, 0 not to
//	ARGV[4] the holder's waiter id (empty: none)
//	ARGV[5] how long the promise to the next waiter lasts, in ms
//
// Returns 1 if it deleted the lock, 0 if the key held something else. When
// the value is absent and ARGV[2] is not 0, it leaves the release marker, so
// a SET of this value still in flight cannot land afterwards.
//
// An announced release (Unlock) takes the holder out of the queue and,
// where the lock is now free, promises it to the first waiter that still
// counts as live (SEEN: until when, as the waiter's own client set it when it
// last joined), dropping those past it. It publishes that waiter's
// id on "<lock key>:promised:<client id>", the channel of the waiter's
// client only (a waiter id is "<client id>/<n>"); if nobody waits, it
// publishes "" on "<lock key>:released", which every waiting client
// hears. Nodes where the lock was already gone promise it too, so that
// every node promises it to its first waiter (the same one on every node
// unless two waiters arrived there within moments of each other). Where nobody is queued and
// nothing is promised, it publishes nothing: every waiter refused by this
// node is in its queue. Notifications are a hint (waiters fall back to
// their retry delay), so a PUBLISH that fails, say because an ACL denies
// the channel, does not fail the release.
var (
	//go:embed lua/release.lua
	releaseSource string
	Release       = luascript.New(releaseSource)
)

// Extend and FencedExtend re-apply a TTL where the key still holds this value. It
// never creates the key: an expired lock stays expired. The fenced one also
// raises the node's longest TTL in use to it (Repair waits that long).
//
//	KEYS[1] lock key, fenced: KEYS[2] the node's id, KEYS[3] its longest TTL
//	ARGV[1] value, ARGV[2] TTL in ms
var (
	//go:embed lua/fenced_extend.lua
	fencedExtendSource string
	FencedExtend       = luascript.New(fencedExtendSource)

	//go:embed lua/extend.lua
	extendSource string
	Extend       = luascript.New(extendSource)
)

// Inspect reads a lock name without writing (flagged no-writes): its
// holder, the key's remaining TTL and the name's committed token.
var (
	//go:embed lua/inspect.lua
	inspectSource string
	Inspect       = luascript.New(inspectSource)
)

// QueuePrelude is the waiting line as the acquisition scripts see it (the
// release script keeps its own side): the fair handoff of a contended lock
// (docs/design.md).
//
// Every attempt of a waiter in Lock (WAITER, stable across its attempts)
// that a node refuses puts it in that node's queue, and renews until when
// it counts as live there (SEEN: now plus its own client's STALE). (An
// attempt granted does not: most locks are free when asked for, and
// queueing every attempt was a fifth of an uncontended Lock's node time.) Its
// place is the node's own time at the attempt minus how long the waiter says
// it has waited already (WAITED, measured on the client's monotonic clock;
// 0 on its first attempt), the lowest over its attempts: a copy of an
// attempt that sat in a paused node's socket, or a node clock stepped back,
// moves it back where it belongs at its next prompt attempt. No wall clock of a
// client is involved, so a client whose clock is off cannot jump the queue
// (one a minute behind took the lock turn after turn while others timed
// out); and a node that first sees a waiter late (it was hung, or lost its
// queue) puts it about where it started waiting. Each node orders by
// its own clock, so two waiters that arrive within a few milliseconds of
// each other may stand in different orders on different nodes: docs/design.md
// says why that is acceptable, and how the waiters then give back the
// promises that split (fairqueue.Queue.Yield). Unlock takes the holder out,
// then promises the lock to the first waiter that still counts as live: it
// sets NEXT to that waiter for a short while and publishes its id. While
// NEXT names someone else, the node refuses every acquisition. Promises
// only ever refuse more, so they cannot break mutual exclusion; they
// expire, so they cannot block for long.
//
// The script defining them must set NEXT, QUEUE and SEEN (keys) and WAITER
// (empty for no waiter) first, and pass STALE (ms) and WAITED (µs) as ARGV[4]
// and ARGV[5].
//
//go:embed lua/queue.lua
var QueuePrelude string

// Leave takes a waiter that gave up out of the queue. If the lock was
// promised to it, the promise is withdrawn and the others are told.
//
//	KEYS[1] lock key, KEYS[2..4] promise NEXT, QUEUE, SEEN
//	ARGV[1] waiter id
var (
	//go:embed lua/leave.lua
	leaveSource string
	Leave       = luascript.New(leaveSource)
)

// Yield gives back a promise that its waiter could not use.
//
//	KEYS[1] lock key, KEYS[2] promise NEXT
//	ARGV[1] waiter id
var (
	//go:embed lua/yield.lua
	yieldSource string
	Yield       = luascript.New(yieldSource)
)

// The family's Inspect scripts (inspect_family.go), read only as Inspect
// is: a multi-lock's members or any set of lock names (InspectMulti), a
// read-write lock (RWInspect), a semaphore (SemInspect).
var (
	//go:embed lua/inspect_keys.lua
	inspectKeysPrelude string
	//go:embed lua/inspect_multi.lua
	inspectMultiBody string
	//go:embed lua/rw_inspect.lua
	rwInspectBody string
	//go:embed lua/sem_inspect.lua
	semInspectBody string

	InspectMulti = luascript.New(noWrites + inspectKeysPrelude + inspectMultiBody)
	RWInspect    = luascript.New(noWrites + inspectKeysPrelude + rwInspectBody)
	SemInspect   = luascript.New(noWrites + inspectKeysPrelude + sizePrelude + semInspectBody)
)

// noWrites is the shebang that flags a script read only (Redis 7.0 and
// later): it then runs on read-only replicas, under read-only ACLs and
// while the node is out of memory.
const noWrites = "#!lua flags=no-writes\n"

// Revoke releases a lock on a node if it holds the value given, whoever
// took it, as the holder's Unlock would (lua/revoke.lua): the value it
// revoked, or "".
var (
	//go:embed lua/revoke.lua
	revokeSource string
	Revoke       = luascript.New(wrongTypePrelude + `local function releaseOne(KEYS, ARGV)
` + releaseSource + `end
` + revokeSource)
)
