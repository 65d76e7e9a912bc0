package node

import (
	"os"
	"time"
)

// Config describes a node to start.
type Config struct {
	// Name labels the node; StartProcesses numbers them "n0", "n1", ...
	Name string
	// Persistence chooses what survives a restart.
	Persistence Persistence
	// Binary is the server to run, a path or a name looked up in PATH.
	// Empty means $REDLOCK_SERVER_BINARY (ServerBinaryEnv) if set, such as
	// "valkey-server" to run the suite against Valkey, else "redis-server".
	Binary string
	// BaseDir holds the node's temporary directory; empty means os.TempDir().
	BaseDir string
	// Args are extra redis-server arguments, such as "--maxmemory-policy", "noeviction".
	Args []string
	// Env is added to the server's environment (LD_PRELOAD for clock faults).
	Env []string
	// StartTimeout bounds the wait for the server to answer PING (default 10s).
	StartTimeout time.Duration
	// Proxy puts an embedded Toxiproxy in front of the node, so that the
	// link faults (Cut, SetJitter, ResetPeer, ...) work. Addr is then the
	// proxy's address.
	Proxy bool
	// FakeClock runs the server under libfaketime, so that JumpClock works.
	FakeClock bool
}

// ServerBinaryEnv names the environment variable that chooses the server
// StartProcess runs when Config.Binary is empty.
const ServerBinaryEnv = "REDLOCK_SERVER_BINARY"

// DefaultBinary is the server StartProcess runs when Config.Binary is
// empty: $REDLOCK_SERVER_BINARY, or "redis-server" if that is unset. The
// server must speak Redis 7's protocol and Lua: redis-server 7.0 or later,
// or valkey-server.
func DefaultBinary() string {
	if b := os.Getenv(ServerBinaryEnv); b != "" {
		return b
	}
	return "redis-server"
}
