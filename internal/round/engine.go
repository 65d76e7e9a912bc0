package round

import (
	"context"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/batch"
	"github.com/redis/go-redis/v9"
)

// Config is what an engine needs to know of the client's configuration.
type Config struct {
	// NodeTimeout bounds a call on a node that answers.
	NodeTimeout time.Duration
	// Patience is how long a round waits for a majority's answers: it is
	// never cut shorter, since a saturated machine makes every node late.
	Patience time.Duration
	// Hooks are called around every node call (Trace's NodeCall and NodeReply).
	Hooks Hooks
	// Batch is the most calls one pipeline to a node carries (package
	// batch); 0 sends every call on its own.
	Batch int
}

// Hooks are optional callbacks at each node call of a round, named by the
// round ("lock", "commit"...).
type Hooks struct {
	NodeCall  func(round string, node int)
	NodeReply func(round string, node int, r NodeResult)
}

// Engine runs rounds on a fixed list of nodes. It owns the goroutines that
// make the calls, each node's health, and the record of its failed dials;
// and the closing of all of it. It is safe for concurrent use.
type Engine struct {
	nodes   []redis.UniversalClient
	links   []redis.UniversalClient // what the calls go through: the nodes, or their batch.Links
	batches []*batch.Link           // the links, when batched
	// riding: calls may ride their batches without a worker (batched.go).
	// Not with per-node hooks: a hook that blocks must hold up only its
	// node's part of the round, which needs a goroutine per call.
	riding            bool
	timeout, patience time.Duration
	hooks             Hooks

	mu      sync.Mutex
	closed  bool
	closing chan struct{}   // closed by Close: background retries stop
	life    context.Context // ends at Close: background work stops
	endLife context.CancelFunc
	bg      sync.WaitGroup // every node call (FanOut) and background task (Go)
	workers workers        // the goroutines that run the calls

	health []nodeHealth  // per node: is it hung (health.go)
	dials  []*dialRecord // per node: its last failed dial (dials.go), or nil
	epoch  time.Time     // the origin of Since
}

// New returns an engine over nodes, which it does not copy and never
// changes. It adds a dial hook to each node's go-redis client (watchDials).
func New(nodes []redis.UniversalClient, cfg Config) *Engine {
	e := &Engine{
		nodes:    nodes,
		timeout:  cfg.NodeTimeout,
		patience: cfg.Patience,
		hooks:    cfg.Hooks,
		closing:  make(chan struct{}),
		health:   make([]nodeHealth, len(nodes)),
		dials:    make([]*dialRecord, len(nodes)),
		epoch:    time.Now(),
	}
	for i, n := range nodes {
		e.dials[i] = watchDials(n)
	}
	e.links = nodes
	if cfg.Batch > 0 {
		e.links = make([]redis.UniversalClient, len(nodes))
		for i, n := range nodes {
			l := batch.NewLink(n, cfg.Batch)
			e.links[i] = l
			e.batches = append(e.batches, l)
		}
		e.riding = cfg.Hooks.NodeCall == nil && cfg.Hooks.NodeReply == nil
	}
	e.workers.stop = e.closing
	e.life, e.endLife = context.WithCancel(context.Background())
	return e
}

// Close stops the engine: later rounds send nothing and return ErrClosed,
// Closing is closed and Life ends. It does not wait: see Wait.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	close(e.closing)
	e.endLife()
}

// Wait waits for every call and background task the engine started, and
// for its workers, to end. Call it after Close.
func (e *Engine) Wait() {
	e.bg.Wait()
	e.workers.wg.Wait()
	for _, l := range e.batches {
		l.Wait()
	}
}

// IfOpen runs f and reports true, unless the engine is closed: then it
// reports false. f runs under the lock Close takes, so what it registers
// (a call Close must wait for) cannot miss the wait.
func (e *Engine) IfOpen(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	f()
	return true
}

// Go runs f on a goroutine that Wait waits for, unless the engine is
// closed: then it runs nothing and reports false.
func (e *Engine) Go(f func()) bool { return e.IfOpen(func() { e.bg.Go(f) }) }

// Hold makes Wait wait until Unhold is called. A round's Then calls it
// for work that follows the call but waits for something else first (a
// rollback waits for the verdict): Then must not block the goroutine that
// runs it, and Close must not return before that work is done.
func (e *Engine) Hold() { e.bg.Add(1) }

// Unhold ends a Hold.
func (e *Engine) Unhold() { e.bg.Done() }

// GoHeld runs f on a goroutine that Wait waits for, closed or not. Call it
// only from a Then, or under a Hold, which keeps Wait from having returned.
func (e *Engine) GoHeld(f func()) { e.bg.Go(f) }

// Closing is closed by Close: background retries stop.
func (e *Engine) Closing() <-chan struct{} { return e.closing }

// Life is a context that ends at Close.
func (e *Engine) Life() context.Context { return e.life }

// Epoch is when the engine was made: the origin of Since.
func (e *Engine) Epoch() time.Time { return e.epoch }

// Since is the time since the engine was made, in ns, on the monotonic
// clock.
func (e *Engine) Since() int64 { return int64(time.Since(e.epoch)) }

// NodeTimeout is the configured node timeout.
func (e *Engine) NodeTimeout() time.Duration { return e.timeout }
