package nodescript

import (
	_ "embed"

	"github.com/quorumlock/redlock/internal/luascript"
)

// The scripts of a semaphore (docs/semaphore.md): K slots, slot i being the
// mutex of "<name>#<i>", each acquired by the mutex's scripts after a check
// of the semaphore's size stored on the node (lua/permits.lua). The size
// key is the last of KEYS; K, the slot and the retention the last three of
// ARGV. Commit and Release are the mutex's.
var (
	//go:embed lua/permits.lua
	permitsPrelude string
	//go:embed lua/slot_extend.lua
	slotExtendSource string
	//go:embed lua/census.lua
	censusSource string
	//go:embed lua/setpermits.lua
	setPermitsSource string

	SlotAcquire = luascript.New(`local NEXT, QUEUE, SEEN = KEYS[3], KEYS[4], KEYS[5]
local WAITER = ARGV[3]
` + wrongTypePrelude + permitsPrelude + QueuePrelude + acquireBody)
	FencedSlotAcquire = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY, ROSTERKEY = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local NONCE, ROSTER = ARGV[1], ARGV[6]
local NEXT, QUEUE, SEEN = KEYS[10], KEYS[11], KEYS[12]
local WAITER = ARGV[3]
` + IdentityPrelude + wrongTypePrelude + permitsPrelude + QueuePrelude + fencedAcquireBody)
	// SlotExtend is a slot's extension, fenced or not (lua/slot_extend.lua).
	SlotExtend = luascript.New(slotExtendSource)
	// Census tells which slots a node holds (lua/census.lua).
	Census = luascript.New(censusSource)
	// SetPermits stores a semaphore's size (lua/setpermits.lua).
	SetPermits = luascript.New(wrongTypePrelude + setPermitsSource)
)
