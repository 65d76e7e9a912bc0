package nodescript

import (
	_ "embed"

	"github.com/quorumlock/redlock/internal/luascript"
)

// The scripts of a leader election (the root package's election.go): the
// election is the mutex of its name, and the leader's published value a
// hash beside its lock key, written only where the leader holds the lock
// (lua/proclaim.lua) and read with it (lua/leader.lua, read only).
var (
	//go:embed lua/proclaim.lua
	proclaimBody string
	//go:embed lua/leader.lua
	leaderBody string

	Proclaim = luascript.New(wrongTypePrelude + proclaimBody)
	Leader   = luascript.New(noWrites + inspectKeysPrelude + leaderBody)
)
