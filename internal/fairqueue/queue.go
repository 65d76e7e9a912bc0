package fairqueue

import (
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Clock is where the times of promises come from: the client's lock clock
// (a test may stand in one that jumps).
type Clock interface {
	Now() time.Time
}

// Config is what a Queue needs to know of its client.
type Config struct {
	// ID names the client in its waiters' ids ("<id>/<n>") and in the
	// channel on which it hears of the locks promised to them.
	ID string
	// NodeTimeout bounds a subscriber's calls and the leaves of a closed
	// client (leaveClosed).
	NodeTimeout time.Duration
	// PromiseLife is how long a node's promise to a waiter holds there
	// (the client's promiseFor).
	PromiseLife time.Duration
	// Clock dates the promises heard.
	Clock Clock
	// Subscribe, if not nil, is called on the node's subscriber goroutine
	// just before a subscription is sent to node (Trace's Subscribe).
	Subscribe func(node int)
}

// Queue is a client's subscriber connections, and its waiters' way out of
// the lock's queue on the nodes (leave.go).
type Queue struct {
	nodes  []redis.UniversalClient
	rounds *round.Engine // the client's round engine: the leave and yield fan-outs, closing
	cfg    Config

	mu   sync.Mutex
	subs []*subscriber // one per node, started on first use
	// locks, by lock key, holds the names whose channels the client wants
	// subscribed: the subscriptions of its waiters, and lingering ones.
	locks  map[string]*subscription
	closed bool
	stop   chan struct{} // closed by Close: the subscribers stop
	wg     sync.WaitGroup
}

// New returns the queue of a client over nodes, whose calls go through
// rounds. It starts nothing: the subscriber connections open with the
// first waiter (Register).
func New(nodes []redis.UniversalClient, rounds *round.Engine, cfg Config) *Queue {
	return &Queue{nodes: nodes, rounds: rounds, cfg: cfg}
}

// Wait waits for the subscribers' goroutines, and the closing of their
// connections, to end. Call it after Close.
func (q *Queue) Wait() { q.wg.Wait() }
