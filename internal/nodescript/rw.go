package nodescript

import (
	_ "embed"

	"github.com/quorumlock/redlock/internal/luascript"
)

// The scripts of a read-write lock (docs/rwlock.md). Per name, on each
// node: the writer's key, which is a mutex's lock key with its marker,
// queue and token H; READERS, a sorted set of reader value -> expiry on the
// node's clock, one entry per reader; HR, the largest reader token
// committed; the phase-fair rule's RPHASE, RWAIT and RSEEN
// (lua/rw_phase.lua). Only writers queue. The writer's acquisitions are the mutex's
// after lua/rw_write_block.lua; its commit is the mutex's after a check of
// HR (lua/rw_write_commit.lua).
var (
	//go:embed lua/rw_write_block.lua
	rwWriteBlock string
	//go:embed lua/rw_read.lua
	rwReadBody string
	//go:embed lua/watch.lua
	watchPrelude string
	//go:embed lua/rw_read_commit.lua
	rwReadCommitBody string
	//go:embed lua/rw_write_commit.lua
	rwWriteCommitPrelude string
	//go:embed lua/rw_release.lua
	rwReleaseBody string
	//go:embed lua/rw_extend.lua
	rwExtendSource string
	//go:embed lua/rw_downgrade.lua
	rwDowngradeSource string
	//go:embed lua/rw_phase.lua
	rwPhasePrelude string
	//go:embed lua/rw_leave.lua
	rwLeaveSource string

	// RWWrite and FencedRWWrite take the keys and arguments of Acquire and
	// FencedAcquire (always with the queue's), then READERS, RPHASE, RWAIT
	// and RSEEN.
	RWWrite = luascript.New(`local NEXT, QUEUE, SEEN, READERS = KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local RPHASE, RWAIT, RSEEN = KEYS[7], KEYS[8], KEYS[9]
local WAITER, FENCED = ARGV[3], false
` + wrongTypePrelude + QueuePrelude + rwPhasePrelude + rwWriteBlock + acquireBody)
	FencedRWWrite = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY, ROSTERKEY = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local NONCE, ROSTER = ARGV[1], ARGV[6]
local NEXT, QUEUE, SEEN, READERS = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local RPHASE, RWAIT, RSEEN = KEYS[14], KEYS[15], KEYS[16]
local WAITER, FENCED = ARGV[3], true
` + IdentityPrelude + wrongTypePrelude + QueuePrelude + rwPhasePrelude + rwWriteBlock + fencedAcquireBody)
	// RWWriteCommit is Commit with HR as KEYS[8].
	RWWriteCommit = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY = KEYS[4], KEYS[5], KEYS[6]
local NONCE = ARGV[3]
` + IdentityPrelude + wrongTypePrelude + `local ID = nodeID()
if not ID then return {-1, 0} end
` + rwWriteCommitPrelude + commitBody)

	// RWRead and FencedRWRead are a reader's acquisition (lua/rw_read.lua).
	RWRead = luascript.New(`local FENCED, WAITER = false, ARGV[5]
local RPHASE, RWAIT, RSEEN = KEYS[8], KEYS[9], KEYS[10]
` + wrongTypePrelude + watchPrelude + rwPhasePrelude + rwReadBody)
	FencedRWRead = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY, ROSTERKEY = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local NONCE, ROSTER = ARGV[1], ARGV[3]
local FENCED, WAITER = true, ARGV[5]
local RPHASE, RWAIT, RSEEN = KEYS[14], KEYS[15], KEYS[16]
` + IdentityPrelude + wrongTypePrelude + watchPrelude + rwPhasePrelude + rwReadBody)
	// RWReadCommit is a reader's commit (lua/rw_read_commit.lua).
	RWReadCommit = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY = KEYS[5], KEYS[6], KEYS[7]
local NONCE = ARGV[3]
` + IdentityPrelude + wrongTypePrelude + `local ID = nodeID()
if not ID then return {-1, 0} end
` + rwReadCommitBody)

	// RWRelease releases either side (lua/rw_release.lua around Release).
	RWRelease = luascript.New(`local RPHASE, RWAIT, RSEEN = KEYS[7], KEYS[8], KEYS[9]
local function releaseOne(KEYS, ARGV)
` + releaseSource + `end
` + rwPhasePrelude + rwReleaseBody)
	// RWExtend extends either side (lua/rw_extend.lua).
	RWExtend = luascript.New(rwExtendSource)
	// RWDowngrade turns the writer into a reader (lua/rw_downgrade.lua).
	RWDowngrade = luascript.New(`local RPHASE, RWAIT, RSEEN = KEYS[6], KEYS[7], KEYS[8]
` + wrongTypePrelude + rwPhasePrelude + rwDowngradeSource)
	// RWLeave takes a reader that gave up out of the readers' wait
	// (lua/rw_leave.lua).
	RWLeave = luascript.New(`local RPHASE, RWAIT, RSEEN = KEYS[6], KEYS[7], KEYS[8]
local function releaseOne(KEYS, ARGV)
` + releaseSource + `end
` + rwPhasePrelude + rwLeaveSource)
)
