package nodescript

import (
	_ "embed"

	"github.com/quorumlock/redlock/internal/luascript"
)

// The scripts of a deployment's identity (docs/fencing.md): reading a
// node's state, provisioning (claim a uuid, record the roster, assign the
// ids), resetting after a majority lost its data, and repair.

var (
	// IdentityPrelude checks a node's identity (nodeID): the script
	// defining it sets IDKEY, REPLIDKEY, LOSTKEY and NONCE first.
	//
	//go:embed lua/identity.lua
	IdentityPrelude string
	// wrongTypePrelude names a key of the wrong type in a WRONGTYPE error.
	//
	//go:embed lua/wrong_type.lua
	wrongTypePrelude string

	//go:embed lua/node_state.lua
	nodeStateBody string
	//go:embed lua/claim.lua
	claimSource string
	//go:embed lua/roster.lua
	rosterSource string
	//go:embed lua/assign.lua
	assignSource string
	//go:embed lua/reset.lua
	resetSource string

	// NodeState reads a node's identity and stamps it if it is not intact.
	NodeState = luascript.New(`local IDKEY, REPLIDKEY, LOSTKEY = KEYS[3], KEYS[4], KEYS[5]
local NONCE = ARGV[1]
` + IdentityPrelude + nodeStateBody)
	Claim  = luascript.New(claimSource)  // a node's uuid, claimed once
	Roster = luascript.New(rosterSource) // the deployment's roster, recorded on a node
	Assign = luascript.New(assignSource) // a node's id: the rank of its uuid in the roster
	Reset  = luascript.New(resetSource)  // Reprovision's reset of a node's identity
)

// SwapUUID replaces the uuid of a node without an id, and Repair gives it
// back its id, conditional on the lost stamp the repairer read.
var (
	//go:embed lua/swap_uuid.lua
	swapUUIDSource string
	//go:embed lua/repair.lua
	repairSource string

	SwapUUID = luascript.New(swapUUIDSource)
	Repair   = luascript.New(repairSource)
)
