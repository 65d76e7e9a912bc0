package redlock

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/quorumlock/redlock/internal/fairqueue"
	"github.com/quorumlock/redlock/internal/identity"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/waiting"
	"github.com/redis/go-redis/v9"
)

// Client acquires locks on a fixed set of independent Redis masters. It is
// safe for concurrent use. The go-redis clients stay the caller's: Close
// does not close them.
type Client struct {
	nodes []redis.UniversalClient
	cfg   config
	log   *slog.Logger

	rounds *round.Engine // the round engine: calls, workers, node health, closing
	leases *lease.Engine // the lease engine: acquire, extend, release, settle
	wait   *waiting.Loop // the waiting calls (Lock and the family's): Close waits for their leaves
	// stopped is closed once Close has run and every goroutine of the
	// client has ended (the engine's and the queue's).
	stopped   chan struct{}
	closeOnce sync.Once

	// ident is the deployment's identity: the check of the node list,
	// provisioning and repair (internal/identity).
	ident *identity.Deployment

	queue *fairqueue.Queue // release notifications for waiters in Lock; leaving the queue, yielding
	// id names the client in its waiters' ids ("<id>/<n>") and in the
	// channel on which it hears of the locks promised to them.
	id string

	args scriptArgs
}

// scriptArgs are the script arguments that depend only on the
// configuration, boxed once (see nodescript.Call): the client's TTL and
// the fencing retention, for its own calls; the lease engine's args.
type scriptArgs struct {
	ttl, retention any
	lease          lease.Args
}

// New returns a client over nodes, which must be independent masters (not
// replicas of each other). Any go-redis client works: a plain client, a
// failover (Sentinel) client, or, without fencing, a cluster client standing
// for one node. With fencing, a failover is caught: the promoted replica
// serves under a new replication id and takes part in no quorum until it
// is repaired (docs/fencing.md); without fencing, a failover can lose locks
// it held, as any node that loses its data can.
//
// With fencing on, the deployment must be provisioned once (Provision)
// before locks can be taken.
//
// A lock needs a majority, N/2+1 nodes. An even N works, but tolerates no
// more failures than N-1 nodes would: six nodes, like five, survive two.
//
// A nil node, including a nil pointer such as a (*redis.Client)(nil), is
// refused with ErrNilNode, and a nil Option with ErrNilOption; every bad
// option has its own error (see the Option functions), wrapped with the
// offending value.
//
// New adds a hook (AddHook) to each node's go-redis client, once per
// client however many lock clients use it, that records why its dials fail,
// so that a node refusing connections is reported as such (NodeFailed with
// the dial error) rather than as timed out. The hook only observes dials,
// holds no lock client, and stays on the go-redis client.
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, ErrNoNodes
	}
	seen := make(map[redis.UniversalClient]int, len(nodes))
	for i, n := range nodes {
		if isNil(n) {
			return nil, fmt.Errorf("%w: nodes[%d] is %T(nil)", ErrNilNode, i, n)
		}
		if j, dup := seen[n]; dup {
			return nil, fmt.Errorf("%w: nodes[%d] and nodes[%d]", ErrDuplicateNode, j, i)
		}
		seen[n] = i
	}
	cfg := defaultConfig()
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: opts[%d]", ErrNilOption, i)
		}
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.fencing {
		if len(nodes) > MaxFencingNodes {
			return nil, fmt.Errorf("%w: got %d", ErrTooManyNodes, len(nodes))
		}
		for i, n := range nodes {
			switch n.(type) {
			case *redis.ClusterClient, *redis.Ring:
				return nil, fmt.Errorf("%w: nodes[%d] is a %T", ErrFencingNode, i, n)
			}
		}
	}
	log := cfg.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		nodes: append([]redis.UniversalClient(nil), nodes...),
		cfg:   cfg,
		log:   log,
		id:    uuid.NewString(),
	}
	c.rounds = round.New(c.nodes, round.Config{NodeTimeout: cfg.nodeTimeout, Patience: cfg.patience(),
		Hooks: traceHooks(cfg.trace), Batch: cfg.batch})
	c.queue = fairqueue.New(c.nodes, c.rounds, fairqueue.Config{ID: c.id, NodeTimeout: cfg.nodeTimeout,
		PromiseLife: c.promiseLife(), Clock: cfg.clock, Subscribe: traceSubscribe(cfg.trace)})
	c.wait = &waiting.Loop{Rounds: c.rounds, Queue: c.queue, Clock: cfg.clock, ID: c.id, Nodes: len(c.nodes),
		Delays: waiting.Delays{RetryMin: cfg.retryDelayMin, RetryMax: cfg.retryDelayMax, MaxOutage: cfg.maxOutage,
			NodeTimeout: cfg.nodeTimeout},
		Log: cfg.logger, Failed: asFailed, NotTried: notTried}
	c.args = scriptArgs{
		ttl:       cfg.ttl.Milliseconds(),
		retention: cfg.retention.Milliseconds(),
	}
	c.args.lease = lease.Args{
		MarkerTTL:   (10 * cfg.ttl).Milliseconds(), // see Engine.markerTTL
		StaleWaiter: c.staleWaiter(),
		PromiseFor:  c.promiseFor(),
		Retention:   c.args.retention,
	}
	keys := nodescript.NewNodeKeys(cfg.keyPrefix)
	c.ident = identity.New(identity.Config{
		Rounds: c.rounds, Nodes: c.nodes, Clock: cfg.clock, Fencing: cfg.fencing,
		TTL: cfg.ttl, NodeTimeout: cfg.nodeTimeout, Patience: cfg.patience(),
		Keys: keys, Retention: c.args.retention, Log: log, QuorumError: quorumError,
	})
	c.leases = lease.New(lease.Config{
		Rounds: c.rounds, Nodes: c.nodes, Clock: cfg.clock, Fencing: cfg.fencing,
		TTL: cfg.ttl, NodeTimeout: cfg.nodeTimeout, Patience: cfg.patience(), Validity: c.cfg.validity,
		Keys: keys, Args: c.args.lease, Log: log, Observed: cfg.observer != nil,
		Hooks: leaseHooks(cfg.trace), Deployment: c.ident,
	})
	return c, nil
}

// Close stops the client's background work and waits for it to end, for
// at most four node timeouts (half a second if that is longer). It always
// returns nil.
//
// Calls in flight end as soon as their nodes answer, and a Lock (or Do)
// waiting between attempts returns ErrClosed at once, once its waiter has
// left the lock's queue (within a node timeout); Close waits for those
// leaves too, so the go-redis clients may be closed once it returns. What
// is still running when the wait ends is abandoned, not cut short: calls
// stuck on a node that does not answer (a paused process, with go-redis
// clients that have no read timeout and ignore deadlines) and the closing
// of the subscriber connection to it. Their goroutines end when the node answers or the
// connection breaks (closing the go-redis client breaks an established one),
// and a rollback they were to run is still run then. Releases still being
// retried against unreachable nodes stop at once, and those keys expire by
// their TTL. Close does not unlock held locks: Unlock them first. Calling
// Close again waits again, as long, for what the first call abandoned.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.rounds.Close()
		c.queue.Close()
		c.stopped = make(chan struct{})
		go func() {
			c.wait.Wait()
			c.rounds.Wait()
			c.queue.Wait()
			close(c.stopped)
		}()
	})
	t := time.NewTimer(c.closeWait())
	defer t.Stop()
	select {
	case <-c.stopped:
	case <-t.C:
		c.log.Warn("redlock: Close abandoned calls to nodes that do not answer; they end when the nodes answer",
			"waited", c.closeWait())
	}
	return nil
}

// closeWait bounds how long Close waits. An attempt in flight is decided
// within a node timeout, and its rollbacks are one more call per node: on
// nodes that answer within the node timeout, all of it ends well within
// four. The floor keeps a tiny node timeout from abandoning calls to a
// loaded but healthy node.
func (c *Client) closeWait() time.Duration {
	return max(4*c.cfg.nodeTimeout, 500*time.Millisecond)
}

// oneSlot refuses, on Cluster or Ring nodes, lock names whose keys fall
// in different hash slots (ErrSpansSlots): a script's keys must share one
// there. A lock key is "<prefix>:{<name>}", whose hash tag is the name up
// to its first '}', so names that share that part ("t}a", "t}b") share a
// slot. Standalone and Sentinel nodes take any names.
func (c *Client) oneSlot(names ...string) error {
	tag := func(n string) string {
		if i := strings.IndexByte(n, '}'); i >= 0 {
			return n[:i]
		}
		return n
	}
	for i, n := range c.nodes {
		switch n.(type) {
		case *redis.ClusterClient, *redis.Ring:
			for _, name := range names[1:] {
				if tag(name) != tag(names[0]) {
					return fmt.Errorf("%w: nodes[%d] is a %T, and %q and %q have different hash tags (names that begin alike up to a '}', as \"t}a\" and \"t}b\", share one)",
						ErrSpansSlots, i, n, names[0], name)
				}
			}
		}
	}
	return nil
}

// isNil reports a nil node, including a nil pointer in a non-nil interface
// (var c *redis.Client; nodes = append(nodes, c)), which a plain == nil
// misses and which would panic in a node goroutine on the first call.
func isNil(n any) bool {
	if n == nil {
		return true
	}
	switch v := reflect.ValueOf(n); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}
