package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
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
}

// Locker is what a worker acquires the lock through: a *redlock.Client,
// or a stand-in for one (Config.Locker).
type Locker interface {
	Lock(ctx context.Context, name string) (*redlock.Lock, error)
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

// Backend starts the nodes a run faults.
type Backend interface {
	Name() string
	// Start starts n nodes with link and clock faults enabled.
	Start(ctx context.Context, n int, p node.Persistence) (node.Group, error)
	// Store starts the protected store, which is never faulted.
	Store(ctx context.Context) (node.Node, error)
}

// Processes runs redis-server processes on loopback.
type Processes struct{}

func (Processes) Name() string { return "process" }

func (Processes) Start(ctx context.Context, n int, p node.Persistence) (node.Group, error) {
	return node.StartProcesses(ctx, n, node.Config{Persistence: p, Proxy: true, FakeClock: true})
}

func (Processes) Store(ctx context.Context) (node.Node, error) {
	return node.StartProcess(ctx, node.Config{Name: "store"})
}

// Containers runs each node in a Docker container. With no Image it builds
// one from the host's server (node.HostImage, or node.ValkeyHostImage when
// $REDLOCK_SERVER_BINARY is valkey-server), which supports clock
// faults; a named image (redis:7.2) does not, so the clock scenarios need
// the host image.
type Containers struct {
	Image string
}

func (Containers) Name() string { return "docker" }

func (c Containers) Start(ctx context.Context, n int, p node.Persistence) (node.Group, error) {
	return node.StartContainers(ctx, n, node.ContainerConfig{Image: c.Image,
		Config: node.Config{Persistence: p, Proxy: true, FakeClock: c.Image == ""}})
}

func (c Containers) Store(ctx context.Context) (node.Node, error) {
	return node.StartContainer(ctx, node.ContainerConfig{Image: c.Image, Config: node.Config{Name: "store"}})
}

// Result is a finished run.
type Result struct {
	Config   Config
	History  *History
	Findings Findings
	Models   []ModelCheck // porcupine's verdicts, beside the hand-written Findings
	Verdict  Verdict
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

	h := &History{Scenario: cfg.Scenario.Name, Fenced: cfg.Fenced, TTL: cfg.TTL}
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
		var lk Locker = lc
		if cfg.Locker != nil {
			lk = cfg.Locker(lc)
		}
		wg.Go(func() {
			defer closeLC()
			w.run(runCtx, i, lk)
		})
	}
	faultsDone := make(chan error, 1)
	go func() { faultsDone <- cfg.Scenario.Inject(runCtx, env) }()
	wg.Wait()
	h.Length = w.now()
	if err := <-faultsDone; err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		h.addError("fault injection: " + err.Error())
	}
	env.healAll(context.Background())

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

// workload is the workers' shared state.
type workload struct {
	cfg    Config
	h      *History
	start  time.Time
	store  *redis.Client
	fence  *fence.Redis
	inCS   atomic.Int32
	pauses chan time.Duration // a pause for the next holder to take
	links  links
}

func (w *workload) now() time.Duration { return time.Since(w.start) }

func (w *workload) lockOptions() []redlock.Option {
	return []redlock.Option{
		redlock.WithTTL(w.cfg.TTL),
		redlock.WithNodeTimeout(w.cfg.NodeTimeout),
		redlock.WithRetryDelay(5*time.Millisecond, 30*time.Millisecond),
		redlock.WithLogger(w.cfg.Logger),
	}
}

func (w *workload) resource() string { return "chaos:" + w.cfg.Scenario.Name }
func (w *workload) dataKey() string  { return "{" + w.resource() + "}:counter" }

// think is how long a holder works between its read and its write.
func (w *workload) think() time.Duration { return w.cfg.TTL / 5 }

// run is one worker: lock, read the counter, think, write it plus one,
// unlock; again until ctx ends.
func (w *workload) run(ctx context.Context, id int, lk Locker) {
	for seq := 0; ctx.Err() == nil; seq++ {
		inv := w.now()
		actx, cancel := context.WithTimeout(ctx, 3*w.cfg.TTL)
		l, err := lk.Lock(actx, "chaos")
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.h.addFailure(Failure{Worker: id, Invoke: inv, End: w.now(), Err: err.Error()})
			}
			continue
		}
		x := Hold{Worker: id, Seq: seq, Invoke: inv, Grant: w.now(), Until: l.Until().Sub(w.start),
			Token: l.Token(), Nodes: outcomes(l.Nodes())}
		w.inCS.Add(1)
		select {
		case d := <-w.pauses: // stop the world, right after acquiring
			x.Paused = d
			i := w.h.addFault(Fault{At: w.now(), Target: fmt.Sprintf("worker %d", id), What: "client paused"})
			time.Sleep(d)
			w.h.endFault(i, w.now())
		default:
		}
		holder := fmt.Sprintf("w%d#%d", id, seq)
		x.Read = w.read(l.Token(), holder)
		if x.Read.Accepted {
			time.Sleep(w.think())
			x.Write = w.write(l.Token(), holder, x.Read.Value+1)
		}
		w.inCS.Add(-1)
		x.End = w.now()
		if err := l.Unlock(context.Background()); err != nil {
			x.Unlock = err.Error()
		}
		w.h.addHold(x)
		// Rest a little between jobs, as real workers do; without it the
		// releasing worker tends to win the lock straight back.
		time.Sleep(rand.N(w.cfg.TTL / 10))
	}
}

func (w *workload) read(token uint64, holder string) *Op {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	op := &Op{Start: w.now()}
	var s string
	var err error
	if w.cfg.Fenced {
		s, err = w.fence.Get(ctx, w.resource(), token, holder, w.dataKey())
	} else {
		s, err = w.store.Get(ctx, w.dataKey()).Result()
	}
	op.End = w.now()
	if errors.Is(err, redis.Nil) {
		s, err = "0", nil
	}
	w.settle(op, err)
	op.Value, _ = strconv.ParseInt(s, 10, 64)
	return op
}

func (w *workload) write(token uint64, holder string, v int64) *Op {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	op := &Op{Start: w.now(), Value: v}
	var err error
	if w.cfg.Fenced {
		err = w.fence.Set(ctx, w.resource(), token, holder, w.dataKey(), strconv.FormatInt(v, 10), 0)
	} else {
		err = w.store.Set(ctx, w.dataKey(), v, 0).Err()
	}
	op.End = w.now()
	w.settle(op, err)
	return op
}

func (w *workload) settle(op *Op, err error) {
	switch {
	case err == nil:
		op.Accepted = true
	case errors.Is(err, fence.ErrStale), errors.Is(err, fence.ErrTokenReused):
		op.Refused, op.Err = true, err.Error()
	default:
		op.Err = err.Error()
		w.h.addError("store: " + err.Error())
	}
}

func outcomes(rs []redlock.NodeResult) string {
	b := make([]byte, 0, len(rs))
	for _, r := range rs {
		c := byte('?')
		switch r.Outcome {
		case redlock.NodeGranted:
			c = '+'
		case redlock.NodeRefused:
			c = '-'
		case redlock.NodeNoReply:
			c = '.'
		case redlock.NodeTimedOut:
			c = 't'
		case redlock.NodeFailed:
			c = 'x'
		case redlock.NodeAmnesiac:
			c = 'a'
		}
		b = append(b, c)
	}
	return string(b)
}
