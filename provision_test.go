package redlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// restartEmpty kills node i and starts it again without its data.
func (cl *cluster) restartEmpty(t *testing.T, i int) {
	t.Helper()
	ctx := context.Background()
	if err := cl.nodes[i].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.nodes[i].WipeData(); err != nil {
		t.Fatal(err)
	}
	if err := cl.nodes[i].Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// Issue 11, item 0, in its fixed order: every node in turn restarted empty,
// 500 ms apart, three workers locking one name, nobody running Repair. The
// clients used to take the emptied deployment for a new one and provision
// it again (175-246 shared tokens per run). Now nothing provisions
// implicitly, and each wiped node rejoins by itself, repaired online from
// the intact majority once its delayed restart has passed, so the workers
// go on locking with tokens that stay unique and in real-time order.
func TestWipedNodesRejoinOnlineOneAtATime(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 5)
	opts := []redlock.Option{redlock.WithTTL(300 * time.Millisecond), redlock.WithNodeTimeout(50 * time.Millisecond),
		redlock.WithRetryDelay(time.Millisecond, 10*time.Millisecond)}
	var (
		mu   sync.Mutex
		ops  []op
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	for range 3 {
		c := cl.newClient(t, opts...)
		wg.Go(func() {
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				inv := time.Now()
				l, err := c.Lock(ctx, "wiped")
				ret := time.Now()
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				ops = append(ops, op{inv, ret, l.Token()})
				mu.Unlock()
				l.Unlock(context.Background())
			}
		})
	}
	for round := range 2 {
		for i := range 5 {
			time.Sleep(500 * time.Millisecond)
			cl.restartEmpty(t, i)
			t.Logf("round %d: node %d restarted empty", round, i)
		}
	}
	// Every node must come back by itself.
	admin := cl.newClient(t, opts...)
	deadline := time.Now().Add(10 * time.Second)
	var ids []int
	for time.Now().Before(deadline) {
		ids, _ = admin.NodeIDs(context.Background())
		if len(ids) == 5 && !slices.Contains(ids, -1) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	before := len(ops)
	mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if slices.Contains(ids, -1) || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 5 {
		t.Fatalf("node ids after the wipes: %v; every node should have rejoined with its own id", ids)
	}
	if len(ops) == before {
		t.Fatal("no acquisition after every node rejoined")
	}
	if bad := checkTokens(ops); len(bad) > 0 {
		t.Fatalf("%d acquisitions, %d token violations, first: %s", len(ops), len(bad), bad[0])
	}
	t.Logf("%d acquisitions, tokens unique and in real-time order", len(ops))
}

// claimGate holds back one client's uuid claims (the first command that
// carries a fresh uuid) on every node until opened.
type claimGate struct {
	reached chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newClaimGate() *claimGate {
	return &claimGate{reached: make(chan struct{}), open: make(chan struct{})}
}

func (g *claimGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *claimGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *claimGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for _, a := range cmd.Args() {
			if s, ok := a.(string); ok && uuid.Validate(s) == nil {
				g.once.Do(func() { close(g.reached) })
				<-g.open
				break
			}
		}
		return next(ctx, cmd)
	}
}

// Issue 11, item 1: a Provision paused after reading every node empty and
// before its claim, resumed after another client provisioned the deployment,
// tokens climbed and one node lost its data. It used to write an id to the
// emptied node (sometimes a duplicate one) and tokens went backwards. Now
// the stale provisioner's roster disagrees with the nodes' and it writes no
// id; the emptied node stays out until repaired, and tokens keep growing.
func TestStaleProvisionCannotReadmitAnEmptiedNode(t *testing.T) {
	cl := startFreshCluster(t, 5)
	ctx := context.Background()
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}
	g := newClaimGate() // X reads every node empty; its claims wait
	// X's go-redis clients retry (their default), so that its claim reaches
	// the emptied node over a new connection.
	var xNodes []redis.UniversalClient
	for _, n := range cl.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		rc.AddHook(g)
		xNodes = append(xNodes, rc)
	}
	x, err := redlock.New(xNodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer node.CloseClients(xNodes)
	defer x.Close()
	xDone := make(chan error, 1)
	go func() { xDone <- x.Provision(ctx) }()
	<-g.reached

	y := cl.newClient(t, opts...)
	if err := y.Provision(ctx); err != nil {
		close(g.open)
		t.Fatal(err)
	}
	var last uint64
	for range 30 {
		l, err := y.TryLock(ctx, "stale")
		if err != nil {
			close(g.open)
			t.Fatal(err)
		}
		last = l.Token()
		l.Unlock(ctx)
	}
	cl.restartEmpty(t, 2)
	close(g.open)
	err = <-xDone
	t.Logf("stale Provision: %v", err)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		t.Logf("nodes: %+v", qe.Nodes)
	}
	ids, err := cl.newClient(t, opts...).NodeIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids[2] != -1 {
		t.Fatalf("ids %v: the stale provisioner gave the emptied node an id", ids)
	}
	// A majority that includes the emptied node: it must not count.
	b := cl.actor(t, []*faultHook{cut(), cut(), nil, nil, nil}, opts...)
	if l, err := b.TryLock(ctx, "stale"); err == nil {
		defer l.Unlock(ctx)
		if l.Token() <= last {
			t.Fatalf("token %d after %d: went backwards through the emptied node", l.Token(), last)
		}
		t.Fatalf("granted through the emptied node (token %d)", l.Token())
	}
	// Repaired, it counts again and tokens keep growing.
	if err := y.Repair(ctx, 2, redlock.RepairWithoutDelay()); err != nil {
		t.Fatal(err)
	}
	l, err := b.TryLock(ctx, "stale")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if l.Token() <= last {
		t.Fatalf("token %d after repair, not above %d", l.Token(), last)
	}
	if ids, _ := y.NodeIDs(ctx); len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 5 || slices.Contains(ids, -1) {
		t.Fatalf("ids after repair %v", ids)
	}
}

// Two go-redis clients for one server are one node, not two: Provision
// refuses them (they would count twice in every quorum).
func TestProvisionRefusesTheSameServerTwice(t *testing.T) {
	cl := startFreshCluster(t, 3)
	twin := redis.NewClient(&redis.Options{Addr: cl.nodes[0].Addr()})
	defer twin.Close()
	c, err := redlock.New([]redis.UniversalClient{cl.clients[0], cl.clients[1], cl.clients[2], twin})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Provision(context.Background()); !errors.Is(err, redlock.ErrDuplicateNode) {
		t.Fatalf("Provision with one server given twice: %v, want ErrDuplicateNode", err)
	}
}
