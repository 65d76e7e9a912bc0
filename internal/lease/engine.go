package lease

import (
	"log/slog"
	"time"

	"github.com/quorumlock/redlock/internal/identity"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Config is what the engine needs of the client: its nodes and rounds, its
// clock, and the settings and arguments the steps of a lease use.
type Config struct {
	Rounds  *round.Engine
	Nodes   []redis.UniversalClient
	Clock   Clock
	Fencing bool
	// TTL is the client's TTL (WithTTL): release markers last ten of it,
	// or ten of the lease's own if that is longer.
	TTL         time.Duration
	NodeTimeout time.Duration
	Patience    time.Duration
	// Validity is how long after an operation's start a lease of ttl is
	// valid: the TTL less the drift allowance.
	Validity func(ttl time.Duration) time.Duration
	Keys     nodescript.NodeKeys // the per-node fencing keys
	Args     Args
	Log      *slog.Logger
	// Observed: an Observer listens, so the per-node outcomes of a success
	// are worth copying.
	Observed bool
	Hooks    Hooks
	// Deployment says which votes an attempt counts (the check of the node
	// list), and is told what the nodes' replies say of their identity
	// (amnesia, online repair).
	Deployment *identity.Deployment
}

// Args are the script arguments that depend only on the configuration,
// boxed once.
type Args struct {
	MarkerTTL, StaleWaiter, PromiseFor, Retention any
}

// Hooks are the Trace callbacks at the lease's protocol points. Either
// may be nil.
type Hooks struct {
	AttemptStart func(name string)
	RoundTwo     func(name string, token uint64)
}

// Engine acquires, extends and releases leases. It is safe for concurrent
// use; one serves a client.
type Engine struct {
	Config
	settling settling // releases still in flight after Release returned
}

// New returns an engine with cfg.
func New(cfg Config) *Engine { return &Engine{Config: cfg} }

// markerTTL is how long a release marker keeps a late acquisition call from
// landing: a node paused for longer than this may still apply one. A lease
// taken For longer than the client's TTL leaves markers ten of its TTLs long.
func (e *Engine) markerTTL(l *Lease) any {
	if l.term.TTL > e.TTL {
		// A late acquisition would set the key for the lease's own TTL.
		return (10 * l.term.TTL).Milliseconds()
	}
	return e.Args.MarkerTTL
}
