package nodescript

import (
	_ "embed"

	"github.com/quorumlock/redlock/internal/luascript"
)

// The scripts of a multi-lock: several names taken, committed, extended and
// released as one on each node (docs/multilock.md). Each member is a mutex
// lock key, so a multi-lock and a mutex on one of its names exclude each
// other, and share the name's committed token H.

// MultiAcquire takes every member or none (lua/multi_take.lua).
//
//	KEYS: per member, lock key, release marker of this value, promise
//	      NEXT, QUEUE, SEEN (FencedMultiAcquire: H before QUEUE)
//	ARGV[1] value, ARGV[2] TTL in ms, ARGV[3] the roster ('' unfenced),
//	ARGV[4] STALE in ms (a waiter's liveness, and a refused set's marks:
//	lua/watch.lua), ARGV[5] WAITED in µs, ARGV[6] the waiter, ARGV[7] how
//	long a promise lasts, in ms (one it passes on: lua/multi_wait.lua)
//
// Without a waiter (TryLockMulti) each member passes only its first three
// keys (fenced: four, to H) and ARGV[1..3]: it neither queues nor listens.
//
// Returns 1, 0 or 2 as Acquire does, or a WRONGTYPE error naming the key.
// FencedMultiAcquire adds the identity checks and a token candidate above
// every member's H (lua/multi_fenced_acquire.lua), and MultiCommit commits
// a token for every member at once (lua/multi_commit.lua).
var (
	//go:embed lua/multi_take.lua
	multiTakePrelude string
	//go:embed lua/multi_fenced_acquire.lua
	multiFencedAcquireBody string
	//go:embed lua/multi_commit.lua
	multiCommitBody string

	//go:embed lua/multi_wait.lua
	multiTakeSet string

	MultiAcquire = luascript.New(`local WAITER = ARGV[6] or ''
local MEMBERS, STRIDE, QOFF = 1, 5, 3
if WAITER == '' then STRIDE = 3 end
` + wrongTypePrelude + watchPrelude + QueuePrelude + multiTakePrelude + multiTakeSet + `return takeSet()
`)
	FencedMultiAcquire = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY, ROSTERKEY = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local NONCE, ROSTER = ARGV[1], ARGV[3]
local WAITER = ARGV[6] or ''
local MEMBERS, STRIDE, QOFF = 7, 6, 4
if WAITER == '' then STRIDE = 4 end
` + IdentityPrelude + wrongTypePrelude + watchPrelude + QueuePrelude + multiTakePrelude + multiTakeSet + multiFencedAcquireBody)
	MultiCommit = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY = KEYS[3], KEYS[4], KEYS[5]
local NONCE = ARGV[3]
` + IdentityPrelude + wrongTypePrelude + `local ID = nodeID()
if not ID then return {-1, 0} end
` + multiCommitBody)
)

// MultiRelease runs the mutex's release (lua/release.lua, unchanged) on each
// member in turn: an Unlock of the set hands every member over to its
// mutex waiters, as the mutex's Unlock does.
//
//	KEYS: per member, the five keys of Release
//	ARGV: Release's, the same for every member
//
// Returns 1 if it deleted every member, 0 if any held something else.
var MultiRelease = luascript.New(`local function releaseOne(KEYS, ARGV)
` + releaseSource + `end
local all = 1
for k = 1, #KEYS, 5 do
  if releaseOne({KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]}, ARGV) ~= 1 then all = 0 end
end
return all
`)

// MultiLeave takes a waiting multi-lock that gave up out of every
// member's queue: the mutex's Leave (lua/leave.lua) on each.
//
//	KEYS: per member, Leave's four (lock key, NEXT, QUEUE, SEEN)
//	ARGV[1] the waiter
var MultiLeave = luascript.New(`local function leaveOne(KEYS, ARGV)
` + leaveSource + `end
for k = 1, #KEYS, 4 do
  leaveOne({KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]}, ARGV)
end
return 1
`)

// MultiExtend re-applies a TTL to every member where all still hold the
// value (lua/multi_extend.lua).
var (
	//go:embed lua/multi_extend.lua
	multiExtendSource string
	MultiExtend       = luascript.New(multiExtendSource)
)
