package nodescript

import (
	_ "embed"

	"github.com/quorumlock/redlock/internal/luascript"
)

// The scripts of a semaphore (docs/semaphore.md): K slots, slot i being the
// mutex of "<name>#<i>"; a permit of n slots is taken, committed (the
// multi-lock's MultiCommit), extended and released as one on each node,
// after a check of the semaphore's size stored there (lua/permits.lua)
// and of its waiting line (lua/sem_line.lua), one per semaphore.
var (
	//go:embed lua/size.lua
	sizePrelude string
	//go:embed lua/size_read.lua
	sizeReadBody string
	//go:embed lua/permits.lua
	permitsPrelude string
	//go:embed lua/sem_line.lua
	semLinePrelude string
	//go:embed lua/sem_take.lua
	semTakePrelude string
	//go:embed lua/sem_release.lua
	semReleaseBody string
	//go:embed lua/sem_extend.lua
	semExtendSource string
	//go:embed lua/sem_leave.lua
	semLeaveBody string
	//go:embed lua/census.lua
	censusSource string
	//go:embed lua/setpermits.lua
	setPermitsSource string
)

// SemAcquire is round 1 of an unfenced acquisition of n permits.
//
//	KEYS[1] the size key   KEYS[2..4] the line's QUEUE, SEEN and NEXT
//	KEYS[5..4+K] the K slot keys
//	KEYS[5+K..] per slot taken: lock key, release marker, promise NEXT
//	ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] '' (no roster)
//	ARGV[4] STALE in ms   ARGV[5] WAITED in µs   ARGV[6] waiter ('': none)
//	ARGV[7] K   ARGV[8] the size's lifetime in ms   ARGV[9] the size's version
//
// Returns 1, 0 or 2 as Acquire does (lua/sem_take.lua), or a PERMITS or
// WRONGTYPE error.
var SemAcquire = luascript.New(`local QUEUE, SEEN, NEXT, WAITER = KEYS[2], KEYS[3], KEYS[4], ARGV[6]
local PERMITS, SLOTS, MEMBERS, STRIDE = 1, 5, 5 + tonumber(ARGV[7]), 3
` + wrongTypePrelude + QueuePrelude + multiTakePrelude + sizePrelude + permitsPrelude + semLinePrelude + semTakePrelude +
	`return takeSet()
`)

// FencedSemAcquire is round 1 of a fenced acquisition of n permits: the
// multi-lock's (lua/multi_fenced_acquire.lua), whose takeSet is the
// semaphore's.
//
//	KEYS[1..6] the node's keys, as FencedMultiAcquire's
//	KEYS[7] the size key   KEYS[8..10] the line's QUEUE, SEEN and NEXT
//	KEYS[11..10+K] the K slot keys
//	KEYS[11+K..] per slot taken: lock key, release marker, promise NEXT, H
//	ARGV as SemAcquire's, ARGV[3] the deployment's roster
var FencedSemAcquire = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY, ROSTERKEY = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local NONCE, ROSTER = ARGV[1], ARGV[3]
local QUEUE, SEEN, NEXT, WAITER = KEYS[8], KEYS[9], KEYS[10], ARGV[6]
local PERMITS, SLOTS, MEMBERS, STRIDE = 7, 11, 11 + tonumber(ARGV[7]), 4
` + IdentityPrelude + wrongTypePrelude + QueuePrelude + multiTakePrelude + sizePrelude + permitsPrelude + semLinePrelude +
	semTakePrelude + multiFencedAcquireBody)

// SemRelease releases a permit's slots, and tells the line of an Unlock
// (lua/sem_release.lua).
var SemRelease = luascript.New(`local QUEUE, SEEN, WAITER, SLOTS = KEYS[1], KEYS[2], '', 3
` + semLinePrelude + `local function releaseOne(KEYS, ARGV)
` + releaseSource + `end
` + semReleaseBody)

// SemLeave takes a waiter that gave up out of the line, and tells the
// waiters behind it (lua/sem_leave.lua).
var SemLeave = luascript.New(`local QUEUE, SEEN, WAITER, SLOTS = KEYS[1], KEYS[2], '', 3
` + semLinePrelude + semLeaveBody)

// SemExtend extends a permit's slots, fenced or not (lua/sem_extend.lua).
var SemExtend = luascript.New(sizePrelude + semExtendSource)

// Census tells which slots a node holds (lua/census.lua); SetPermits
// stores a semaphore's size at a version (lua/setpermits.lua), and
// SizeRead reads it (lua/size_read.lua).
var (
	Census     = luascript.New(censusSource)
	SetPermits = luascript.New(wrongTypePrelude + sizePrelude + setPermitsSource)
	SizeRead   = luascript.New(noWrites + wrongTypePrelude + sizePrelude + sizeReadBody)
)
