package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// soak skips a soak (many goroutines, or seconds of contention, on real
// nodes) unless REDLOCK_SOAK is set: `make soak` runs them, in a CI pass of
// their own, so that `make test` stays short (issue 37). They assert no
// timing, only that nothing breaks under load.
func soak(t *testing.T) {
	t.Helper()
	if os.Getenv("REDLOCK_SOAK") == "" {
		t.Skip("a soak: make soak runs it (REDLOCK_SOAK=1)")
	}
}

// cluster is N real redis-server processes, the go-redis clients the lock
// client uses (default options, as most users have them), and separate
// clients for inspecting the nodes.
type cluster struct {
	nodes   node.Group
	clients []redis.UniversalClient
	inspect []redis.UniversalClient
}

// startCluster starts n nodes without persistence and gives them their
// fencing ids while all of them are up, as a deployment does once; tests
// then pause and kill nodes freely.
func startCluster(t testing.TB, n int) *cluster {
	t.Helper()
	return provisioned(t, startFreshCluster(t, n))
}

// provisioned gives cl's nodes their fencing ids.
func provisioned(t testing.TB, cl *cluster) *cluster {
	t.Helper()
	c, err := redlock.New(cl.clients, redlock.WithTTL(time.Minute), redlock.WithNodeTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	return cl
}

// startFreshCluster starts n empty nodes.
func startFreshCluster(t testing.TB, n int) *cluster {
	t.Helper()
	return startNodes(t, n, node.Config{})
}

// startNodes starts n empty nodes configured by cfg.
func startNodes(t testing.TB, n int, cfg node.Config) *cluster {
	t.Helper()
	g, err := node.StartProcesses(context.Background(), n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{nodes: g, inspect: g.NewClients()}
	for _, nd := range g {
		cl.clients = append(cl.clients, redis.NewClient(&redis.Options{Addr: nd.Addr()}))
	}
	t.Cleanup(func() {
		node.CloseClients(cl.clients)
		node.CloseClients(cl.inspect)
		g.Close()
	})
	return cl
}

// lockAndUnlock runs Lock and then Unlock on c in the background, Lock
// bounded by wait, and delivers Lock's error, or else Unlock's.
func lockAndUnlock(c *redlock.Client, name string, wait time.Duration) <-chan error {
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		l, err := c.Lock(ctx, name)
		if err == nil {
			err = l.Unlock(context.Background())
		}
		got <- err
	}()
	return got
}

// newClient returns a lock client that is closed when the test ends.
func (cl *cluster) newClient(t testing.TB, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(cl.clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (cl *cluster) pause(t testing.TB, idx ...int) (resume func()) {
	t.Helper()
	ctx := context.Background()
	for _, i := range idx {
		if err := cl.nodes[i].Pause(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			for _, i := range idx {
				if err := cl.nodes[i].Resume(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

// holdersOnceReleased is holders once every node is free, or after 10 s:
// Unlock returns at the majority, and a failed attempt waits for its
// rollbacks a node timeout at most; the release or rollback reaches the
// other nodes after, which on a loaded machine can take well over a second.
func (cl *cluster) holdersOnceReleased(t *testing.T, name string) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		vals := cl.holders(t, name)
		if slices.Equal(vals, make([]string, len(vals))) || time.Now().After(deadline) {
			return vals
		}
	}
}

// holders returns, per node, the value stored under the lock key ("" if none).
func (cl *cluster) holders(t *testing.T, name string) []string {
	t.Helper()
	vals := make([]string, len(cl.inspect))
	for i, c := range cl.inspect {
		v, err := c.Get(context.Background(), "redlock:{"+name+"}").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("node %d: %v", i, err)
		}
		vals[i] = v
	}
	return vals
}

// holdAsStranger sets the lock key on the given nodes with a foreign value.
func (cl *cluster) holdAsStranger(t *testing.T, name string, idx ...int) {
	t.Helper()
	for _, i := range idx {
		if err := cl.inspect[i].Set(context.Background(), "redlock:{"+name+"}", "stranger", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func quorumError(t *testing.T, err error) *redlock.QuorumError {
	t.Helper()
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("want a *QuorumError, got %T: %v", err, err)
	}
	return qe
}

func countOutcomes(nodes []redlock.NodeResult) map[redlock.Outcome]int {
	m := map[redlock.Outcome]int{}
	for _, n := range nodes {
		m[n.Outcome]++
	}
	return m
}

func TestNoTwoHoldersOverlap(t *testing.T) {
	soak(t)
	cl := startCluster(t, 5)
	c := cl.newClient(t,
		redlock.WithTTL(5*time.Second),
		redlock.WithNodeTimeout(time.Second),
		redlock.WithRetryDelay(time.Millisecond, 20*time.Millisecond))

	const workers, rounds = 16, 120 // 1,920 handoffs; the chaos suite holds the same rule under faults
	var inside atomic.Int32
	var counter atomic.Int64 // incremented by a read and a separate write: lost updates reveal overlap
	var overlaps atomic.Int32
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for range workers {
		wg.Go(func() {
			for range rounds {
				l, err := c.Lock(ctx, "counter")
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				v := counter.Load()
				time.Sleep(time.Duration(v%3) * 50 * time.Microsecond)
				counter.Store(v + 1)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d acquisitions found another holder inside", n)
	}
	if got := counter.Load(); got != workers*rounds {
		t.Errorf("counter = %d, want %d: updates were lost to overlapping holders", got, workers*rounds)
	}
}

func TestLockSucceedsWithMinorityPausedWithoutWaitingForThem(t *testing.T) {
	cl := startCluster(t, 5)
	const nodeTimeout = 3 * time.Second
	c := cl.newClient(t, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(nodeTimeout))
	resume := cl.pause(t, 3, 4)

	start := time.Now()
	l, err := c.TryLock(context.Background(), "minority")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("TryLock with 2 of 5 paused: %v", err)
	}
	if took >= nodeTimeout/2 {
		t.Errorf("TryLock took %v: it waited on a paused node (node timeout %v)", took, nodeTimeout)
	}
	if got := countOutcomes(l.Nodes()); got[redlock.NodeGranted] != 3 {
		t.Errorf("outcomes %v, want 3 granted", got)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// The paused nodes apply the buffered SET when they resume; the release
	// must still reach them, after it.
	resume()
	c.Close()
	for i, v := range cl.holders(t, "minority") {
		if v != "" {
			t.Errorf("node %d still holds %q after unlock", i, v)
		}
	}
}

func TestLockWithMajorityPausedFailsWhenItsPatienceEnds(t *testing.T) {
	cl := startCluster(t, 5)
	const nodeTimeout = 30 * time.Millisecond
	const ttl = time.Second // the patience: TTL less the drift allowance
	c := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout))
	resume := cl.pause(t, 2, 3, 4)

	// A deadline ends the wait at once.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*nodeTimeout)
	_, err := c.TryLock(ctx, "majority-ctx")
	cancel()
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > ttl/2 {
		t.Fatalf("TryLock with a deadline and 3 of 5 paused: %v after %v, want DeadlineExceeded soon after %v",
			err, took, 5*nodeTimeout)
	}

	start = time.Now()
	_, err = c.TryLock(context.Background(), "majority")
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrUnavailable) || errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("TryLock with 3 of 5 paused: %v, want ErrUnavailable", err)
	}
	// Fewer than a majority answer, which a saturated client machine looks
	// like too: the attempt waits out its patience (issue 13), the TTL less
	// the drift allowance here, and no longer.
	if took > ttl+ttl/2 {
		t.Errorf("TryLock took %v, want about its patience (%v)", took, ttl)
	}
	qe := quorumError(t, err)
	got := countOutcomes(qe.Nodes)
	if got[redlock.NodeGranted] != 2 || got[redlock.NodeTimedOut] != 3 {
		t.Errorf("outcomes %v, want 2 granted and 3 timed out", got)
	}
	for _, r := range qe.Nodes {
		if r.Outcome == redlock.NodeTimedOut && !errors.Is(r.Err, redlock.ErrNodeTimeout) {
			t.Errorf("node %d timed out with %v", r.Node, r.Err)
		}
	}
	// Nothing may stay locked: not the two that granted (rolled back before
	// TryLock returned), not the three whose SET lands when they resume.
	for i, c := range cl.inspect[:2] {
		if n := c.Exists(context.Background(), "redlock:{majority}").Val(); n != 0 {
			t.Errorf("node %d kept the lock after the failed attempt", i)
		}
	}
	resume()
	c.Close()
	for i, v := range cl.holders(t, "majority") {
		if v != "" {
			t.Errorf("node %d holds %q after resume", i, v)
		}
	}
}

func TestTryLockContendedLeavesNothingBehind(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithNodeTimeout(time.Second))
	cl.holdAsStranger(t, "held", 0, 1, 2)

	_, err := c.TryLock(context.Background(), "held")
	if !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("TryLock on a held lock: %v, want ErrLocked", err)
	}
	if errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("contention reported as unavailability: %v", err)
	}
	// The attempt is decided by the third refusal; the last reply may come after.
	if got := countOutcomes(quorumError(t, err).Nodes); got[redlock.NodeRefused] != 3 || got[redlock.NodeGranted]+got[redlock.NodeNoReply] != 2 {
		t.Errorf("outcomes %v, want 3 refused and 2 granted or not yet answered", got)
	}
	c.Close() // waits for the rollback of a node that answered after the decision
	want := []string{"stranger", "stranger", "stranger", "", ""}
	if got := cl.holders(t, "held"); !slices.Equal(got, want) {
		t.Errorf("after the failed attempt nodes hold %q, want %q", got, want)
	}
}

func TestCancelledLockLeavesNothingBehind(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithNodeTimeout(time.Second), redlock.WithRetryDelay(0, time.Millisecond))
	cl.holdAsStranger(t, "busy", 0, 1, 2)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := c.Lock(ctx, "busy")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled context: %v, want context.Canceled", err)
	}
	c.Close() // waits for rollbacks still in flight
	want := []string{"stranger", "stranger", "stranger", "", ""}
	if got := cl.holders(t, "busy"); !slices.Equal(got, want) {
		t.Errorf("after cancellation nodes hold %q, want %q", got, want)
	}

	if _, err := cl.newClient(t).TryLock(ctx, "busy"); !errors.Is(err, context.Canceled) {
		t.Errorf("TryLock with a done context: %v, want context.Canceled", err)
	}
}

func TestUnlockAfterExpiry(t *testing.T) {
	cl := startCluster(t, 5)
	const ttl = 300 * time.Millisecond
	c := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(50*time.Millisecond))
	l, err := c.TryLock(context.Background(), "short")
	if err != nil {
		t.Fatal(err)
	}
	if !l.Until().After(time.Now()) || l.Until().After(time.Now().Add(ttl)) {
		t.Fatalf("Until %v is not within the TTL from now", time.Until(l.Until()))
	}
	select {
	case <-l.Done():
	case <-time.After(5 * ttl):
		t.Fatal("Done did not close after the validity ended")
	}
	time.Sleep(ttl) // let the keys expire on the nodes too
	if err := l.Extend(context.Background()); !errors.Is(err, redlock.ErrExpired) {
		t.Errorf("Extend after expiry: %v, want ErrExpired", err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, redlock.ErrExpired) {
		t.Errorf("Unlock after expiry: %v, want ErrExpired", err)
	}
}

func TestExtendAndUnlock(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "ext")
	if err != nil {
		t.Fatal(err)
	}
	before := l.Until()
	time.Sleep(20 * time.Millisecond)
	if err := l.Extend(ctx); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if !l.Until().After(before) {
		t.Errorf("Extend did not move the deadline: %v -> %v", before, l.Until())
	}
	// Another client is shut out while the lock is held.
	if _, err := cl.newClient(t).TryLock(ctx, "ext"); !errors.Is(err, redlock.ErrLocked) {
		t.Errorf("second owner: %v, want ErrLocked", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done still open after Unlock")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("second Unlock: %v, want the first result (nil)", err)
	}
	if err := l.Extend(ctx); !errors.Is(err, redlock.ErrReleased) {
		t.Errorf("Extend after Unlock: %v, want ErrReleased", err)
	}
	for i, v := range cl.holdersOnceReleased(t, "ext") {
		if v != "" {
			t.Errorf("node %d holds %q after Unlock", i, v)
		}
	}
}

func TestExtendNeverRecreatesAnExpiredKey(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	// Three nodes lose the key, as if it had expired there.
	for _, i := range []int{0, 1, 2} {
		cl.inspect[i].Del(ctx, "redlock:{gone}")
	}
	if err := l.Extend(ctx); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("Extend with the key gone from a majority: %v, want ErrExpired", err)
	}
	for i, v := range cl.holders(t, "gone")[:3] {
		if v != "" {
			t.Errorf("Extend re-created the key on node %d", i)
		}
	}
	if err := l.Unlock(ctx); !errors.Is(err, redlock.ErrExpired) {
		t.Errorf("Unlock: %v, want ErrExpired", err)
	}
}

func TestDoKeepsTheLockPastSeveralTTLs(t *testing.T) {
	cl := startCluster(t, 5)
	const ttl = 400 * time.Millisecond
	c := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond))
	other := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()

	err := c.Do(ctx, "long", func(ctx context.Context, l *redlock.Lock) error {
		for range 4 { // 4 x 1.5 TTL
			time.Sleep(ttl * 3 / 2)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if _, err := other.TryLock(ctx, "long"); !errors.Is(err, redlock.ErrLocked) {
				t.Errorf("another owner got past a kept lock: %v", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	for i, v := range cl.holdersOnceReleased(t, "long") {
		if v != "" {
			t.Errorf("node %d holds %q after Do", i, v)
		}
	}
}

func TestDoCancelsTheFunctionWhenTheLockIsLost(t *testing.T) {
	cl := startCluster(t, 5)
	const ttl = 600 * time.Millisecond
	c := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()
	var beforeEnd bool
	err := c.Do(ctx, "lost", func(fnCtx context.Context, l *redlock.Lock) error {
		for _, c := range cl.inspect { // someone else's cleanup wipes the lock
			c.Del(ctx, "redlock:{lost}")
		}
		select {
		case <-fnCtx.Done():
			beforeEnd = time.Now().Before(l.Until())
			return context.Cause(fnCtx)
		case <-time.After(10 * ttl):
			return errors.New("function context was never cancelled")
		}
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v, want ErrLockLost from the function", err)
	}
	if !errors.Is(err, redlock.ErrExpired) {
		t.Errorf("Do: %v, want the unlock's ErrExpired joined in", err)
	}
	if !beforeEnd {
		t.Error("the function's context was cancelled only after the validity ended")
	}
}

func TestBadInput(t *testing.T) {
	cl := startCluster(t, 3)
	cases := []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []redlock.Option
		want  error
	}{
		{"no nodes", nil, nil, redlock.ErrNoNodes},
		{"nil node", []redis.UniversalClient{cl.clients[0], nil}, nil, redlock.ErrNilNode},
		{"same node twice", []redis.UniversalClient{cl.clients[0], cl.clients[0]}, nil, redlock.ErrDuplicateNode},
		{"TTL too small", cl.clients, []redlock.Option{redlock.WithTTL(time.Millisecond)}, redlock.ErrTTLTooShort},
		{"drift leaves no validity", cl.clients, []redlock.Option{redlock.WithDriftFactor(0.99), redlock.WithTTL(time.Second)}, redlock.ErrNoValidityBudget},
		{"drift factor out of range", cl.clients, []redlock.Option{redlock.WithDriftFactor(-0.1)}, redlock.ErrBadDriftFactor},
		{"node timeout leaves no validity", cl.clients, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(time.Second)}, redlock.ErrNoValidityBudget},
		{"zero node timeout", cl.clients, []redlock.Option{redlock.WithNodeTimeout(0)}, redlock.ErrBadNodeTimeout},
		{"negative retry delay", cl.clients, []redlock.Option{redlock.WithRetryDelay(-time.Millisecond, time.Millisecond)}, redlock.ErrBadRetryDelay},
		{"retry min above max", cl.clients, []redlock.Option{redlock.WithRetryDelay(time.Second, time.Millisecond)}, redlock.ErrBadRetryDelay},
		// A typed nil passes a plain nil check; the old code took it, and
		// the first lock panicked in a node goroutine, killing the process.
		{"typed nil node", []redis.UniversalClient{cl.clients[0], (*redis.Client)(nil), cl.clients[2]}, nil, redlock.ErrNilNode},
		{"typed nil cluster node", []redis.UniversalClient{cl.clients[0], cl.clients[1], (*redis.ClusterClient)(nil)},
			[]redlock.Option{redlock.WithoutFencing()}, redlock.ErrNilNode},
		// "app:{x}" with name "y" and "app" with name "x}:{y" would share the
		// key "app:{x}:{y}", minting from two node-id namespaces.
		{"brace in key prefix", cl.clients, []redlock.Option{redlock.WithKeyPrefix("app:{x}")}, redlock.ErrBadKeyPrefix},
		{"open brace in key prefix", cl.clients, []redlock.Option{redlock.WithKeyPrefix("app{")}, redlock.ErrBadKeyPrefix},
		{"empty key prefix", cl.clients, []redlock.Option{redlock.WithKeyPrefix("")}, redlock.ErrBadKeyPrefix},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redlock.New(tc.nodes, tc.opts...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("New: %v, want %v", err, tc.want)
			}
			if c != nil {
				t.Fatal("New returned a client with an error")
			}
		})
	}

	c := cl.newClient(t)
	ctx := context.Background()
	if _, err := c.TryLock(ctx, ""); !errors.Is(err, redlock.ErrEmptyName) {
		t.Errorf("empty name: %v, want ErrEmptyName", err)
	}
	for _, n := range cl.inspect {
		n.HSet(ctx, "redlock:{hash}", "f", "v")
	}
	start := time.Now()
	if _, err := c.Lock(ctx, "hash"); !errors.Is(err, redlock.ErrWrongType) {
		t.Errorf("Lock on a hash key: %v, want ErrWrongType", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Lock kept retrying a WRONGTYPE key for %v", took)
	}
	closed := cl.newClient(t)
	closed.Close()
	if _, err := closed.TryLock(ctx, "x"); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("TryLock after Close: %v, want ErrClosed", err)
	}
}

// Lock names that cannot make a key are refused before anything is sent, by
// every call that takes a name; the error does not carry a huge name back.
func TestBadLockNames(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second))
	ctx := context.Background()
	huge := strings.Repeat("n", 1<<20)
	calls := map[string]func(name string) error{
		"TryLock": func(name string) error {
			l, err := c.TryLock(ctx, name)
			if err == nil {
				err = l.Unlock(ctx)
			}
			return err
		},
		"Lock": func(name string) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			l, err := c.Lock(ctx, name)
			if err == nil {
				err = l.Unlock(ctx)
			}
			return err
		},
		"Do": func(name string) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return c.Do(ctx, name, func(context.Context, *redlock.Lock) error { return nil })
		},
	}
	for call, f := range calls {
		err := f(huge)
		if !errors.Is(err, redlock.ErrNameTooLong) {
			t.Errorf("%s with a 1 MiB name: %v, want ErrNameTooLong", call, truncate(err))
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("%s: the error is %d bytes long: it echoes the name", call, len(err.Error()))
		}
		if err := f(huge[:redlock.MaxNameLength+1]); !errors.Is(err, redlock.ErrNameTooLong) {
			t.Errorf("%s with a name one byte too long: %v, want ErrNameTooLong", call, truncate(err))
		}
		// An empty hash tag: a Redis Cluster would hash the lock's keys to
		// different slots.
		if err := f("}x"); !errors.Is(err, redlock.ErrBadName) {
			t.Errorf("%s with a name beginning with '}': %v, want ErrBadName", call, err)
		}
		if err := f(huge[:redlock.MaxNameLength]); err != nil {
			t.Errorf("%s with a name of MaxNameLength bytes: %v", call, truncate(err))
		}
	}
	for i, n := range cl.inspect {
		keys, err := n.Keys(ctx, "redlock:{n*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if len(k) > redlock.MaxNameLength+100 {
				t.Errorf("node %d holds a key of %d bytes", i, len(k))
			}
		}
		if n, _ := n.Exists(ctx, "redlock:{}x}").Result(); n != 0 {
			t.Errorf("node %d holds the key of the refused name \"}x\"", i)
		}
	}
	// Braces elsewhere in a name are fine: the keys of one name still share
	// one hash tag (the name up to its first '}'), and no two names share a key.
	for _, name := range []string{"a}b", "a{b", "{x}", "a}:{b"} {
		l, err := c.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("TryLock(%q): %v", name, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q): %v", name, err)
		}
	}
}

// truncate keeps a test's failure message short when err echoes a huge name.
func truncate(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 200 {
		return fmt.Sprintf("%s... (%d bytes)", s[:200], len(s))
	}
	return s
}

func TestEvenNodeCountNeedsThree(t *testing.T) {
	cl := startCluster(t, 4)
	c := cl.newClient(t, redlock.WithNodeTimeout(200*time.Millisecond))
	cl.pause(t, 3)
	l, err := c.TryLock(context.Background(), "even")
	if err != nil {
		t.Fatalf("4 nodes, 1 paused: %v", err)
	}
	l.Unlock(context.Background())
	cl.pause(t, 2)
	if _, err := c.TryLock(context.Background(), "even2"); !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("4 nodes, 2 paused: %v, want ErrUnavailable", err)
	}
}

func TestClientPausedDuringAcquisitionGetsNoLock(t *testing.T) {
	cl := startCluster(t, 5)
	const ttl = 2 * time.Second
	// The second reading of the clock, taken once the majority has answered,
	// comes a TTL later: the process was frozen between the two.
	var reads atomic.Int32
	clk := &redlock.StepClock{OnNow: func(s *redlock.StepClock) {
		if reads.Add(1) == 2 {
			s.Jump(ttl)
		}
	}}
	c := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(500*time.Millisecond), redlock.WithClock(clk))
	_, err := c.TryLock(context.Background(), "frozen")
	if !errors.Is(err, redlock.ErrNoValidity) {
		t.Fatalf("TryLock across a TTL-long pause: %v, want ErrNoValidity", err)
	}
	// The rollbacks past the first node timeout go on in the background.
	for i, v := range cl.holdersOnceReleased(t, "frozen") {
		if v != "" {
			t.Errorf("node %d kept %q", i, v)
		}
	}
}

func TestWaiterWakesOnUnlock(t *testing.T) {
	cl := startCluster(t, 5)
	const retry = 3 * time.Second
	holder := cl.newClient(t)
	waiter := cl.newClient(t, redlock.WithRetryDelay(retry, retry), redlock.WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()
	l, err := holder.TryLock(ctx, "wake")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, func() { l.Unlock(ctx) })
	start := time.Now()
	lw, err := waiter.Lock(ctx, "wake")
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Unlock(ctx)
	if took := time.Since(start); took >= retry {
		t.Fatalf("the waiter took %v: it slept out its %v retry delay instead of waking on the release", took, retry)
	}
}

// The scripts are sent by digest. A node that forgot them (restarted, or
// SCRIPT FLUSH) gets the source instead, in every round.
func TestNodesThatForgotTheScriptsStillServe(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(5*time.Second))
	ctx := context.Background()
	for round := range 2 {
		for i, in := range cl.inspect {
			if err := in.ScriptFlush(ctx).Err(); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
		}
		l, err := c.TryLock(ctx, "flushed")
		if err != nil {
			t.Fatalf("round %d: TryLock: %v", round, err)
		}
		for i, in := range cl.inspect {
			if err := in.ScriptFlush(ctx).Err(); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
		}
		if err := l.Extend(ctx); err != nil {
			t.Fatalf("round %d: Extend: %v", round, err)
		}
		for _, in := range cl.inspect {
			in.ScriptFlush(ctx)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		// Unlock returned at the majority; node 0 may be one of the rest.
		for deadline := time.Now().Add(time.Second); cl.inspect[0].Exists(ctx, "redlock:{flushed}").Val() != 0; {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: lock key still there 1 s after Unlock", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// A Redis Cluster can stand for one node of an unfenced client (every key of
// a lock shares its hash tag). Three one-shard clusters, through go-redis's
// ClusterClient: acquire, extend, wait for a release, unlock.
func TestClusterClientsAsNodes(t *testing.T) {
	nodes := startClusterModeNodes(t, 3)
	ctx := context.Background()
	opts := []redlock.Option{redlock.WithoutFencing(), redlock.WithTTL(5 * time.Second),
		redlock.WithNodeTimeout(time.Second)}
	a, err := redlock.New(nodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	l, err := a.TryLock(ctx, "sharded")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	b, err := redlock.New(nodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := lockAndUnlock(b, "sharded", 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

// startClusterModeNodes starts n one-shard Redis Clusters, each serving
// every slot, and returns a ClusterClient for each.
func startClusterModeNodes(t *testing.T, n int) []redis.UniversalClient {
	t.Helper()
	g, err := node.StartProcesses(context.Background(), n, node.Config{
		Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx := context.Background()
	inspect := g.NewClients()
	t.Cleanup(func() { node.CloseClients(inspect) })
	for i, in := range inspect {
		if err := in.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	for i, in := range inspect {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			info, _ := in.ClusterInfo(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: cluster state never ok: %s", i, info)
			}
		}
	}
	var nodes []redis.UniversalClient
	for _, nd := range g {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nd.Addr()}})
		t.Cleanup(func() { cc.Close() })
		nodes = append(nodes, cc)
	}
	return nodes
}
