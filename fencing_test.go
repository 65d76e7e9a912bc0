package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/chaos"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// faultHook injects faults into the commands of one go-redis client: it is
// the wire between one lock client and one node.
type faultHook struct {
	before func(script string) error // may block; an error fails the command unsent
	after  func(script string)       // runs once the node has answered
}

var errLinkCut = errors.New("test: link cut")

// cut fails every command: the link between this client and the node is down.
func cut() *faultHook { return &faultHook{before: func(string) error { return errLinkCut }} }

// cutScript fails only the given script.
func cutScript(name string) *faultHook {
	return &faultHook{before: func(s string) error {
		if s == name {
			return errLinkCut
		}
		return nil
	}}
}

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := redlock.ScriptName(cmd.Args())
		if h.before != nil {
			if err := h.before(name); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		err := next(ctx, cmd)
		if h.after != nil && (err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT")) {
			h.after(name)
		}
		return err
	}
}

// actor is one lock client with its own wires to the nodes, so that faults
// can be injected on its links alone.
func (cl *cluster) actor(t *testing.T, hooks []*faultHook, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	on := make(map[int]redis.Hook)
	for i, h := range hooks {
		if h != nil {
			on[i] = h
		}
	}
	return cl.hookedOn(t, on, opts...)
}

// hookedOn is a lock client with its own wires to the nodes; the wire to
// node i runs hooks[i].
func (cl *cluster) hookedOn(t *testing.T, hooks map[int]redis.Hook, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	clients := make([]redis.UniversalClient, len(cl.nodes))
	for i, n := range cl.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		if h, ok := hooks[i]; ok {
			rc.AddHook(h)
		}
		clients[i] = rc
	}
	c, err := redlock.New(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		node.CloseClients(clients)
	})
	return c
}

// attempt is the outcome of a TryLock run in the background.
type attempt struct {
	l   *redlock.Lock
	err error
}

// tryLocker is what a test makes its attempts through: a *redlock.Client,
// or a redlock.Naive that grants by a broken token scheme.
type tryLocker interface {
	TryLock(ctx context.Context, name string, opts ...redlock.LockOption) (*redlock.Lock, error)
}

// scheme is c, or c granting by the naive variant v if v is not 0.
func scheme(c *redlock.Client, v redlock.NaiveVariant) tryLocker {
	if v == 0 {
		return c
	}
	return redlock.Naive{Client: c, Variant: v}
}

// tryLockAsync runs c.TryLock(ctx, name) in the background.
func tryLockAsync(ctx context.Context, c tryLocker, name string) <-chan attempt {
	done := make(chan attempt, 1)
	go func() {
		l, err := c.TryLock(ctx, name)
		done <- attempt{l, err}
	}()
	return done
}

// op is one acquisition: when it was invoked, when it returned, its token.
type op struct {
	invoke, ret time.Time
	token       uint64
}

// checkTokens runs the chaos harness's checkers for uniqueness (U) and
// real-time order (M1) over a history of acquisitions.
func checkTokens(ops []op) []string {
	h := &chaos.History{Fenced: true}
	t0 := ops[0].invoke
	for _, o := range ops {
		if o.invoke.Before(t0) {
			t0 = o.invoke
		}
	}
	for _, o := range ops {
		h.Holds = append(h.Holds, chaos.Hold{Invoke: o.invoke.Sub(t0), Grant: o.ret.Sub(t0), End: o.ret.Sub(t0), Token: o.token})
	}
	f := chaos.Check(h)
	var bad []string
	for _, v := range f.Violations {
		if v.Check == chaos.CheckDuplicates || v.Check == chaos.CheckRealTime {
			bad = append(bad, v.Detail)
		}
	}
	if n := f.Duplicates + f.TokenOrder; n > len(bad) {
		bad = append(bad, fmt.Sprintf("(%d violations in all)", n))
	}
	return bad
}

func TestTokensAreUniqueAndFollowRealTime(t *testing.T) {
	soak(t)
	cl := startCluster(t, 5)
	opts := []redlock.Option{redlock.WithTTL(5 * time.Second), redlock.WithNodeTimeout(time.Second),
		redlock.WithRetryDelay(time.Millisecond, 20*time.Millisecond)}
	ctx := context.Background()
	var (
		mu  sync.Mutex
		ops []op
	)
	acquire := func(t *testing.T, c *redlock.Client, name string) {
		inv := time.Now()
		l, err := c.Lock(ctx, name)
		if err != nil {
			t.Error(err)
			return
		}
		ret := time.Now()
		if l.Token() == 0 || l.Token() >= 1<<53 {
			t.Errorf("token %d out of range", l.Token())
		}
		mu.Lock()
		ops = append(ops, op{inv, ret, l.Token()})
		mu.Unlock()
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
	check := func(t *testing.T, want int) {
		mu.Lock()
		defer mu.Unlock()
		if len(ops) != want {
			t.Fatalf("%d acquisitions, want %d", len(ops), want)
		}
		if bad := checkTokens(ops); len(bad) > 0 {
			t.Fatalf("%d violations, first: %s", len(bad), bad[0])
		}
		ops = nil
	}

	t.Run("sequential", func(t *testing.T) {
		c := cl.newClient(t, opts...)
		for range 1000 {
			acquire(t, c, "seq")
		}
		check(t, 1000)
	})
	t.Run("concurrent on one key", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 8 {
			c := cl.newClient(t, opts...) // separate clients, as separate processes would be
			wg.Go(func() {
				for range 150 {
					acquire(t, c, "conc")
				}
			})
		}
		wg.Wait()
		check(t, 1200)
	})
	t.Run("rotating minority paused", func(t *testing.T) {
		c := cl.newClient(t, append(opts, redlock.WithNodeTimeout(200*time.Millisecond))...)
		var wg sync.WaitGroup
		for round := range 5 {
			resume := cl.pause(t, round%5, (round+2)%5)
			for range 4 {
				wg.Go(func() {
					for range 50 {
						acquire(t, c, "rot")
					}
				})
			}
			wg.Wait()
			resume()
		}
		check(t, 1000)
	})
}

// withCounter sets the fencing counter G of one node, to recreate the
// states of the counterexamples.
func (cl *cluster) withCounter(t *testing.T, i int, c int) {
	t.Helper()
	if err := cl.inspect[i].Set(context.Background(), "redlock:fence:counter", c, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// Counterexample 1 of docs/fencing.md: tokens as the max of INCR replies,
// never written back. Two sequential acquisitions over different majorities
// get decreasing tokens.
func TestCounterexample1MaxOfIncrGoesBackwards(t *testing.T) {
	for _, tc := range []struct {
		name    string
		variant redlock.NaiveVariant
		broken  bool
	}{
		{"quorum tokens", 0, false},
		{"naive max of INCR", redlock.NaiveNoCommit, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startCluster(t, 3)
			cl.withCounter(t, 0, 7)
			opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}
			ctx := context.Background()

			a := scheme(cl.actor(t, []*faultHook{nil, nil, cut()}, opts...), tc.variant) // A reaches n0, n1
			la, err := a.TryLock(ctx, "ce1")
			if err != nil {
				t.Fatal(err)
			}
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			b := scheme(cl.actor(t, []*faultHook{cut(), nil, nil}, opts...), tc.variant) // B, later, reaches n1, n2
			lb, err := b.TryLock(ctx, "ce1")
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Unlock(ctx)
			went := lb.Token() <= la.Token()
			t.Logf("A got %d, then B got %d", la.Token(), lb.Token())
			if went != tc.broken {
				t.Fatalf("token went backwards = %v, want %v (A %d, B %d)", went, tc.broken, la.Token(), lb.Token())
			}
		})
	}
}

// Counterexamples 2 and 3 of docs/fencing.md, replayed with the exact
// message order:
//
//   - B's round 1 reaches n1 first; its message to n2 is held back.
//   - A is refused by n1, granted on n0 and n2, commits its token on n0 and
//     n1 (its commit to n2 is lost), and unlocks: its lease has ended.
//   - B's held message reaches n2. B is granted on n1 and n2 with
//     candidates minted before A's commit reached them.
//
// The quorum algorithm sees A's token on n1 in round 2 and aborts B. Without
// the abort rule (3), B holds a token smaller than one committed before it
// was granted (M2); with the validity checked after round 1 as well (2), B's
// lease follows A's with a smaller token (LO).
func TestCounterexamples2And3DelayedRoundOne(t *testing.T) {
	for _, tc := range []struct {
		name    string
		variant redlock.NaiveVariant
		broken  bool
	}{
		{"quorum tokens", 0, false},
		{"naive validity after round 1 (2)", redlock.NaiveEarlyValidity, true},
		{"naive no abort rule (3)", redlock.NaiveNoAbort, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startCluster(t, 3)
			cl.withCounter(t, 0, 7)
			opts := []redlock.Option{redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(10 * time.Second)}
			ctx := context.Background()

			bReachedN1 := make(chan struct{})
			releaseN2 := make(chan struct{})
			var once sync.Once
			b := scheme(cl.actor(t, []*faultHook{
				cut(),
				{after: func(s string) {
					if s == "acquire" {
						once.Do(func() { close(bReachedN1) })
					}
				}},
				{before: func(s string) error {
					if s == "acquire" {
						<-releaseN2
					}
					return nil
				}},
			}, opts...), tc.variant)
			a := scheme(cl.actor(t, []*faultHook{nil, nil, cutScript("commit")}, opts...), tc.variant)

			bDone := tryLockAsync(ctx, b, "ce")
			<-bReachedN1

			la, err := a.TryLock(ctx, "ce")
			if err != nil {
				close(releaseN2)
				t.Fatalf("A: %v", err)
			}
			if err := la.Unlock(ctx); err != nil {
				close(releaseN2)
				t.Fatalf("A unlock: %v", err)
			}
			close(releaseN2)
			rb := <-bDone

			if rb.err == nil {
				defer rb.l.Unlock(ctx)
				t.Logf("A committed %d and unlocked; B was then granted with %d", la.Token(), rb.l.Token())
			} else {
				t.Logf("A committed %d and unlocked; B: %v", la.Token(), rb.err)
			}
			broken := rb.err == nil && rb.l.Token() <= la.Token()
			if broken != tc.broken {
				t.Fatalf("B granted with a smaller token = %v, want %v (B: %v)", broken, tc.broken, rb.err)
			}
			if !tc.broken && rb.err != nil && !errors.Is(rb.err, redlock.ErrSuperseded) {
				t.Errorf("B failed with %v, want ErrSuperseded", rb.err)
			}
		})
	}
}

func TestClientPausedBetweenRoundsGetsNoToken(t *testing.T) {
	cl := startCluster(t, 5)
	const ttl = 300 * time.Millisecond
	c := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond),
		redlock.WithTrace(&redlock.Trace{RoundTwo: func(string, uint64) { time.Sleep(ttl + 100*time.Millisecond) }}))
	l, err := c.TryLock(context.Background(), "paused")
	if !errors.Is(err, redlock.ErrNoValidity) || l != nil {
		t.Fatalf("TryLock with a pause longer than the TTL between rounds: %v, %v; want ErrNoValidity", l, err)
	}
	c.Close()
	for i, v := range cl.holders(t, "paused") {
		if v != "" {
			t.Errorf("node %d holds %q", i, v)
		}
	}
}

func TestProvisioningConverges(t *testing.T) {
	cl := startFreshCluster(t, 5)
	ctx := context.Background()
	const clients = 8
	ids := make([][]int, clients)
	var wg sync.WaitGroup
	for k := range clients {
		c := cl.newClient(t, redlock.WithNodeTimeout(2*time.Second))
		wg.Go(func() {
			if err := c.Provision(ctx); err != nil {
				t.Error(err)
				return
			}
			var err error
			if ids[k], err = c.NodeIDs(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for k := range clients {
		if !slices.Equal(ids[k], ids[0]) {
			t.Fatalf("client %d sees ids %v, client 0 %v", k, ids[k], ids[0])
		}
	}
	sorted := slices.Sorted(slices.Values(ids[0]))
	if !slices.Equal(sorted, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("ids %v, want a permutation of 0..4", ids[0])
	}
}

// A deployment nobody provisioned is never provisioned behind the caller's
// back (a deployment whose nodes all lost their data looks the same): Lock
// fails at once with ErrNotProvisioned, and works after Provision.
func TestUnprovisionedDeploymentFailsFast(t *testing.T) {
	cl := startFreshCluster(t, 3)
	c := cl.newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.TryLock(ctx, "first"); !errors.Is(err, redlock.ErrNotProvisioned) {
		t.Fatalf("TryLock on a fresh deployment: %v, want ErrNotProvisioned", err)
	}
	if _, err := c.Lock(ctx, "first"); !errors.Is(err, redlock.ErrNotProvisioned) || ctx.Err() != nil {
		t.Fatalf("Lock on a fresh deployment: %v (ctx %v), want ErrNotProvisioned at once", err, ctx.Err())
	}
	if ids, err := c.NodeIDs(ctx); err != nil || !slices.Equal(ids, []int{-1, -1, -1}) {
		t.Fatalf("ids after failed locks %v, %v: nothing may be provisioned", ids, err)
	}
	if err := c.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	if l.Token() == 0 {
		t.Fatal("no token")
	}
}

// A node restarted without its data is the single node where A's commit
// majority and B's majority meet. Without the amnesia guard B would get a
// smaller token; with it the node is left out until Repair raises its
// counters.
func TestAmnesiacNodeIsExcludedUntilRepaired(t *testing.T) {
	cl := startCluster(t, 3) // no persistence: a restart comes back empty
	ctx := context.Background()
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}
	a := cl.actor(t, []*faultHook{nil, nil, cut()}, opts...)
	for range 20 { // A's tokens climb on n0 and n1 only
		l, err := a.TryLock(ctx, "amnesia")
		if err != nil {
			t.Fatal(err)
		}
		l.Unlock(ctx)
	}
	la, err := a.TryLock(ctx, "amnesia")
	if err != nil {
		t.Fatal(err)
	}
	la.Unlock(ctx)

	if err := cl.nodes[1].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.nodes[1].Start(ctx); err != nil {
		t.Fatal(err)
	}
	b := cl.actor(t, []*faultHook{cut(), nil, nil}, opts...) // B's majority must be n1, n2
	_, err = b.TryLock(ctx, "amnesia")
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("B through the amnesiac node: %v, want ErrUnavailable", err)
	}
	if got := quorumError(t, err).Nodes[1].Outcome; got != redlock.NodeAmnesiac {
		t.Fatalf("n1 outcome %v, want amnesiac", got)
	}
	// Explicit Provision must not paper over amnesia either.
	if err := cl.newClient(t).Provision(ctx); !errors.Is(err, redlock.ErrAmnesia) {
		t.Fatalf("Provision with an amnesiac node: %v, want ErrAmnesia", err)
	}

	// The node restarted a moment ago: Repair waits out the delayed restart.
	var soon *redlock.RepairTooSoonError
	if err := cl.newClient(t).Repair(ctx, 1, redlock.RepairAdopting()); !errors.As(err, &soon) || soon.Wait <= 0 || soon.Wait > redlock.DefaultTTL {
		t.Fatalf("Repair right after the restart: %v, want a RepairTooSoonError", err)
	}
	if err := cl.newClient(t).Repair(ctx, 1, redlock.RepairWithoutDelay(), redlock.RepairAdopting()); err != nil {
		t.Fatalf("Repair: %v", err)
	}
	lb, err := b.TryLock(ctx, "amnesia")
	if err != nil {
		t.Fatalf("B after repair: %v", err)
	}
	defer lb.Unlock(ctx)
	if lb.Token() <= la.Token() {
		t.Fatalf("after repair B got %d, not above A's %d", lb.Token(), la.Token())
	}
	ids, err := cl.newClient(t).NodeIDs(ctx)
	if err != nil || slices.Contains(ids, -1) || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 {
		t.Fatalf("ids after repair %v, %v", ids, err)
	}
}

// The same placement with the node's id merely put back, the way a naive
// operator would: this is the failure the guard and Repair prevent, and it
// shows the test above can fail.
func TestAmnesiacNodeRestoredWithoutRepairBreaksTokens(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	// The identity keys a naive operator copies back: the id, and the uuid
	// and roster that the node list check and the scripts look at.
	identity, err := cl.inspect[1].MGet(ctx, "redlock:node-id", "redlock:node-uuid", "redlock:node-roster").Result()
	if err != nil {
		t.Fatal(err)
	}
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}
	a := cl.actor(t, []*faultHook{nil, nil, cut()}, opts...)
	var la *redlock.Lock
	for range 20 {
		if la, err = a.TryLock(ctx, "amnesia"); err != nil {
			t.Fatal(err)
		}
		la.Unlock(ctx)
	}
	cl.nodes[1].Kill(ctx)
	cl.nodes[1].Start(ctx)
	cl.inspect[1].MSet(ctx, "redlock:node-id", identity[0], "redlock:node-uuid", identity[1],
		"redlock:node-roster", identity[2]) // no repair
	b := cl.actor(t, []*faultHook{cut(), nil, nil}, opts...)
	lb, err := b.TryLock(ctx, "amnesia")
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Unlock(ctx)
	if lb.Token() > la.Token() {
		t.Fatalf("B got %d > A's %d: the placement did not exercise the lost counter", lb.Token(), la.Token())
	}
}

func TestWithoutFencing(t *testing.T) {
	cl := startFreshCluster(t, 3)
	c := cl.newClient(t, redlock.WithoutFencing())
	l, err := c.TryLock(context.Background(), "plain")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	if l.Token() != 0 {
		t.Errorf("token %d without fencing", l.Token())
	}
	if n, _ := cl.inspect[0].Exists(context.Background(), "redlock:node-id", "redlock:{plain}:fence:counter").Result(); n != 0 {
		t.Errorf("unfenced lock wrote fencing state (%d keys)", n)
	}

	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.nodes[0].Addr()}})
	defer cluster.Close()
	if _, err := redlock.New([]redis.UniversalClient{cluster}); !errors.Is(err, redlock.ErrFencingNode) {
		t.Errorf("fenced client over a Cluster client: %v, want ErrFencingNode", err)
	}
	if c, err := redlock.New([]redis.UniversalClient{cluster}, redlock.WithoutFencing()); err != nil {
		t.Errorf("unfenced client over a Cluster client: %v", err)
	} else {
		c.Close()
	}
}
