package identity

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// Config is what a Deployment needs of the client: its nodes and rounds,
// its clock, its settings, and how it makes its public errors.
type Config struct {
	Rounds      *round.Engine
	Nodes       []redis.UniversalClient
	Clock       interface{ Now() time.Time } // the lease engine's clock
	Fencing     bool
	TTL         time.Duration
	NodeTimeout time.Duration
	Patience    time.Duration       // the round's patience (see round.Config)
	Keys        nodescript.NodeKeys // the per-node fencing keys
	Retention   any                 // the fencing retention in ms, boxed once for the scripts
	Log         *slog.Logger
	// QuorumError makes the root package's *QuorumError of f (same
	// fields): the errors of the operations here are the client's own.
	QuorumError func(f *verdict.Failure) error
}

// Deployment is one client's view of the deployment's identity, and the
// operations on it.
type Deployment struct {
	cfg    Config
	rounds *round.Engine
	nodes  []redis.UniversalClient
	log    *slog.Logger
	keys   nodescript.NodeKeys

	amnesiac  []atomic.Bool // per node: the amnesia warning was given
	repairing []atomic.Bool // per node: an online repair runs (repair_online.go)
	list      nodeList      // the check of the node list (nodelist.go)
	knownMu   sync.Mutex
	known     []string   // per node: the uuid this client saw it hold (repair_online.go)
	stamps    stampWatch // per node: the lost stamp seen, and since when (repair_delay.go)
}

// New returns the identity of the deployment of cfg's nodes, as yet
// unchecked.
func New(cfg Config) *Deployment {
	n := len(cfg.Nodes)
	return &Deployment{
		cfg:       cfg,
		rounds:    cfg.Rounds,
		nodes:     cfg.Nodes,
		log:       cfg.Log,
		keys:      cfg.Keys,
		amnesiac:  make([]atomic.Bool, n),
		repairing: make([]atomic.Bool, n),
		known:     make([]string, n),
		stamps:    newStampWatch(n),
	}
}

// quorumError is the client's public error of f.
func (d *Deployment) quorumError(f *verdict.Failure) error { return d.cfg.QuorumError(f) }

// Knows reports whether the last check of the node list saw node i intact
// with fencing id id.
func (d *Deployment) Knows(i, id int) bool {
	v := d.list.view.Load()
	return v != nil && i < len(v.IDs) && v.IDs[i] == id
}

// Recheck, Amnesiac and Intact are what the lease engine tells the
// deployment of the nodes' identities as their replies come in.
func (d *Deployment) Recheck()       { d.checkList(false) }
func (d *Deployment) Amnesiac(i int) { d.noteAmnesia(i) }
func (d *Deployment) Intact(i int)   { d.noteIntact(i) }

// noteAmnesia warns, once per episode, that node i lost its fencing state,
// and starts repairing it online (repair_online.go).
func (d *Deployment) noteAmnesia(i int) {
	if d.amnesiac[i].CompareAndSwap(false, true) {
		d.log.Warn("redlock: node's fencing state is not intact (it lost its data, was restarted or "+
			"promoted, or was never provisioned); it is left out of quorums until repaired", "node", i)
	}
	d.repairOnline(i)
}

// noteIntact re-arms the warning once node i answers as intact again.
func (d *Deployment) noteIntact(i int) {
	if d.amnesiac[i].Load() {
		d.amnesiac[i].Store(false)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
