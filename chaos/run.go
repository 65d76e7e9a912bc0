package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// Config is one run: one scenario, fenced or not.
type Config struct {
	Scenario    Scenario
	Fenced      bool
	Duration    time.Duration // how long the workload runs (default 4s)
	Workers     int           // concurrent lock clients (default 4)
	Nodes       int           // lock nodes (default 5)
	TTL         time.Duration // lock TTL (default 1s)
	NodeTimeout time.Duration // per-node timeout (default 200ms)
	Backend     Backend       // default Processes
	Logger      *slog.Logger
	// Locker, if set, stands between each worker and its client: the
	// worker acquires through Locker(client). It is for calibrating the
	// checkers: a test passes a broken token scheme and shows that they
	// catch it. Unset, the workers call the client's own Lock.
	Locker func(*redlock.Client) Locker
	// Primitive is what the workers take: Mutex (the default), or one of
	// the lock family's (family.go).
	Primitive string
}

// Locker is what a worker acquires the lock through: a *redlock.Client,
// or a stand-in for one (Config.Locker).
type Locker interface {
	Lock(ctx context.Context, name string) (*redlock.Lock, error)
}

// clientLocker is a *redlock.Client as a Locker: the client's Lock also
// takes LockOptions, which the workers do not use.
type clientLocker struct{ c *redlock.Client }

func (l clientLocker) Lock(ctx context.Context, name string) (*redlock.Lock, error) {
	return l.c.Lock(ctx, name)
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 4 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Nodes <= 0 {
		c.Nodes = 5
	}
	if c.TTL <= 0 {
		c.TTL = time.Second
	}
	if c.NodeTimeout <= 0 {
		c.NodeTimeout = 200 * time.Millisecond
	}
	if c.Backend == nil {
		c.Backend = Processes{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Result is a finished run.
type Result struct {
	Config   Config
	History  *History
	Findings Findings
	Models   []ModelCheck // porcupine's verdicts, beside the hand-written Findings
	Verdict  Verdict
}

// Name is the run's scenario, and for the lock family the primitive
// before it: "semaphore/client-pause".
func (r *Result) Name() string {
	if r.Config.Primitive == Mutex {
		return r.Config.Scenario.Name
	}
	return r.Config.Primitive + "/" + r.Config.Scenario.Name
}

// Run runs one scenario: it starts fresh nodes and a store, runs the
// workers for the configured time while the scenario injects its faults,
// and checks the history.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	nodes, err := cfg.Backend.Start(ctx, cfg.Nodes, cfg.Scenario.Persistence)
	if err != nil {
		return nil, err
	}
	defer nodes.Close()
	storeNode, err := cfg.Backend.Store(ctx)
	if err != nil {
		return nil, err
	}
	defer storeNode.Close()
	store := storeNode.NewClient()
	defer store.Close()

	// An admin client, with every node up: provisions fencing ids, repairs.
	admin, closeAdmin, err := newLockClient(nodes, cfg, nil, -1, redlock.WithTTL(10*cfg.TTL), redlock.WithNodeTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer closeAdmin()
	if cfg.Fenced {
		if err := admin.Provision(ctx); err != nil {
			return nil, fmt.Errorf("provision: %w", err)
		}
	}

	h := &History{Scenario: cfg.Scenario.Name, Fenced: cfg.Fenced, TTL: cfg.TTL, Primitive: cfg.Primitive}
	if cfg.Primitive == Semaphore {
		h.Permits = FamilyPermits
	}
	w := &workload{cfg: cfg, h: h, start: time.Now(), store: store,
		fence: fence.NewRedis(store, "fence"), pauses: make(chan time.Duration)}
	env := &Env{Nodes: nodes, TTL: cfg.TTL, h: h, w: w, admin: admin, fenced: cfg.Fenced}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		lc, closeLC, err := newLockClient(nodes, cfg, &w.links, i, w.lockOptions()...)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		var lk Locker = clientLocker{lc}
		if cfg.Locker != nil {
			lk = cfg.Locker(lc)
		}
		wg.Go(func() {
			defer closeLC()
			if cfg.Primitive != Mutex {
				w.runFamily(runCtx, i, lc)
				return
			}
			w.run(runCtx, i, lk)
		})
	}
	if cfg.Primitive == Election {
		for i := range Observers {
			oc, closeOC, err := newLockClient(nodes, cfg, nil, -1, w.lockOptions()...)
			if err != nil {
				cancel()
				wg.Wait()
				return nil, err
			}
			wg.Go(func() {
				defer closeOC()
				w.observe(runCtx, i, oc)
			})
		}
	}
	faultsDone := make(chan error, 1)
	go func() { faultsDone <- cfg.Scenario.Inject(runCtx, env) }()
	wg.Wait()
	h.Length = w.now()
	if err := <-faultsDone; err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		h.addError("fault injection: " + err.Error())
	}
	env.healAll(context.Background())

	if cfg.Primitive != Mutex {
		if h.Finals, err = w.finals(context.Background()); err != nil {
			return nil, fmt.Errorf("read final values: %w", err)
		}
		f := CheckFamily(h)
		return &Result{Config: cfg, History: h, Findings: f,
			Verdict: judge(cfg.Scenario, cfg.Fenced, h, f, nil)}, nil
	}
	final, err := store.Get(context.Background(), w.dataKey()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read final value: %w", err)
	}
	h.Final = final
	f := Check(h)
	models := CheckModels(h)
	return &Result{Config: cfg, History: h, Findings: f, Models: models,
		Verdict: judge(cfg.Scenario, cfg.Fenced, h, f, models)}, nil
}

// newLockClient builds a lock client with its own connections to the
// nodes; with links, they go through that worker's wires.
func newLockClient(nodes node.Group, cfg Config, l *links, worker int, opts ...redlock.Option) (*redlock.Client, func(), error) {
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
		if l != nil {
			rc.AddHook(l.hook(worker, i))
		}
		clients[i] = rc
	}
	if !cfg.Fenced {
		opts = append(opts, redlock.WithoutFencing())
	}
	c, err := redlock.New(clients, opts...)
	if err != nil {
		node.CloseClients(clients)
		return nil, nil, err
	}
	return c, func() {
		c.Close()
		node.CloseClients(clients)
	}, nil
}
