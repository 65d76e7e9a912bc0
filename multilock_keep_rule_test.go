package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// wireCut fails every command once cut is set: the client's wires are gone
// (no renewal, no Leave reaches the node). Not faultHook (fencing_test.go):
// that one lets pipelines through, and the batching link sends calls made
// while another is in flight as pipelines.
type wireCut struct{ cut *atomic.Bool }

func (h wireCut) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h wireCut) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.cut.Load() {
			err := errors.New("test: wire cut")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (h wireCut) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.cut.Load() {
			err := errors.New("test: wire cut")
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// slowWire delays every command on one wire by d (a slow link).
type slowWire struct{ d *atomic.Int64 }

func (h slowWire) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowWire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if d := time.Duration(h.d.Load()); d > 0 {
			time.Sleep(d)
		}
		return next(ctx, cmd)
	}
}
func (h slowWire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// promisePTTLs is the PTTL of name's promise key on every node, and its value.
func (cl *cluster) promisesOf(t *testing.T, name string) []string {
	var out []string
	for _, in := range cl.inspect {
		ctx := context.Background()
		v, _ := in.Get(ctx, "redlock:{"+name+"}:next").Result()
		p, _ := in.PTTL(ctx, "redlock:{"+name+"}:next").Result()
		out = append(out, fmt.Sprintf("%q/%v", v, p))
	}
	return out
}

// From the adversarial review of the multi-lock wait bound (issue 34).
// A keeper whose wires are cut (no Leave): how long is the kept
// member idle for the Lock waiter behind it? And what do TryLock and
// Inspect say about a kept member meanwhile?
func TestAKeptMemberIsFreedWithinARenewalPeriodOfItsKeeperDying(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	holder := cl.newClient(t, redlock.WithTTL(30*time.Second))
	a, err := holder.TryLock(ctx, "rd-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := holder.TryLock(ctx, "rd-b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	var cut atomic.Bool
	hooks := map[int]redis.Hook{0: wireCut{&cut}, 1: wireCut{&cut}, 2: wireCut{&cut}}
	const ttl = 200 * time.Millisecond
	// STALE = 1000 + 2*50 + 1 = 1101 ms
	kc := cl.hookedOn(t, hooks, redlock.WithTTL(ttl), redlock.WithRetryDelay(500*time.Millisecond, time.Second))
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	multi := make(chan error, 1)
	go func() {
		_, err := kc.LockMulti(mctx, []string{"rd-a", "rd-b"})
		multi <- err
	}()
	cl.inQueue(t, "rd-a", 1)
	got := lockAndUnlock(cl.newClient(t), "rd-a", 30*time.Second)
	cl.inQueue(t, "rd-a", 2)
	time.Sleep(3 * ttl)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Wait until the promise is kept (PTTL raised above the promise period).
	kept := false
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && !kept; time.Sleep(5 * time.Millisecond) {
		n := 0
		for _, in := range cl.inspect {
			if p, _ := in.PTTL(ctx, "redlock:{rd-a}:next").Result(); p > 500*time.Millisecond {
				n++
			}
		}
		kept = n >= 2
	}
	t.Logf("promises: %v (kept: %v)", cl.promisesOf(t, "rd-a"), kept)
	// A kept member, free: what TryLock and Inspect say.
	tl, terr := cl.newClient(t).TryLock(ctx, "rd-a")
	if terr == nil {
		t.Logf("TryLock of a kept member succeeded")
		_ = tl.Unlock(ctx)
	}
	info, ierr := cl.newClient(t).Inspect(ctx, "rd-a")
	t.Logf("TryLock of the kept member: ErrLocked=%v err=%v; Inspect: held=%v holder=%q err=%v",
		errors.Is(terr, redlock.ErrLocked), terr, info.Held, info.Holder, ierr)
	// Hold the keep for 2 s more (the keeper renews while alive).
	select {
	case err := <-got:
		t.Fatalf("Lock waiter got rd-a while the keeper was alive: %v", err)
	case <-time.After(2 * time.Second):
	}
	t.Logf("after 2s alive: promises %v", cl.promisesOf(t, "rd-a"))
	cut.Store(true)
	died := time.Now()
	select {
	case err := <-got:
		t.Logf("Lock waiter got rd-a %v after the keeper died (err %v); STALE = 1101ms", time.Since(died).Round(time.Millisecond), err)
		if d := time.Since(died); d > 5*1101*time.Millisecond {
			t.Errorf("kept member idle %v after its keeper died, against a renewal period of 1.1 s", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Lock waiter did not get rd-a within 20s of the keeper dying: %v", cl.promisesOf(t, "rd-a"))
	}
	mcancel()
	<-multi
}

// From the review: three waiting multi-locks over {a,b}, {b,c}, {c,a}, all past
// their TTL, every member held by a Lock holder; the holders release in
// order order. Every multi-lock must get its set.
func TestThreeMultiLocksInACyclePastTheirTTLAllGetTheirSets(t *testing.T) {
	for _, n := range []int{3, 5} {
		for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
			t.Run(fmt.Sprintf("n%d-%v", n, order), func(t *testing.T) {
				cycleOnce(t, n, order, nil)
			})
		}
	}
}

// holdAll takes every name with one client, for 30 s.
func holdAll(t *testing.T, cl *cluster, names []string) []*redlock.Lock {
	t.Helper()
	holder := cl.newClient(t, redlock.WithTTL(30*time.Second))
	var held []*redlock.Lock
	for _, nm := range names {
		l, err := holder.TryLock(context.Background(), nm)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	return held
}

func cycleOnce(t *testing.T, n int, order []int, mopts []redlock.Option) {
	cl := startCluster(t, n)
	ctx := context.Background()
	names := []string{"cy-a", "cy-b", "cy-c"}
	held := holdAll(t, cl, names)
	sets := [][]string{{"cy-a", "cy-b"}, {"cy-b", "cy-c"}, {"cy-c", "cy-a"}}
	const ttl = 200 * time.Millisecond
	var wg sync.WaitGroup
	res := make([]chan error, len(sets))
	start := time.Now()
	for i, s := range sets {
		res[i] = make(chan error, 1)
		c := cl.newClient(t, append([]redlock.Option{redlock.WithTTL(ttl)}, mopts...)...)
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			m, err := c.LockMulti(wctx, s)
			if err == nil {
				time.Sleep(20 * time.Millisecond)
				err = m.Unlock(ctx)
			}
			res[i] <- err
		})
	}
	defer wg.Wait()
	for _, nm := range names {
		cl.inQueue(t, nm, 2)
	}
	time.Sleep(3 * ttl)
	for _, i := range order {
		if err := held[i].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	for i := range sets {
		if err := <-res[i]; err != nil {
			t.Errorf("multi-lock %v: %v after %v; promises a %v b %v c %v", sets[i], err, time.Since(start).Round(time.Millisecond),
				cl.promisesOf(t, "cy-a"), cl.promisesOf(t, "cy-b"), cl.promisesOf(t, "cy-c"))
		}
	}
	t.Logf("all three sets taken within %v", time.Since(start).Round(time.Millisecond))
}

// From the review, across nodes: three multi-locks over {a,b}, {b,c}, {c,a} that
// started at the same moment, their links slow so that each node orders them
// differently (a Condorcet cycle: node 0 M1<M2<M3, node 1 M2<M3<M1, node 2
// M3<M1<M2). Every member is then free. Does any of them get its set?
func TestACycleOfMultiLocksOrderedDifferentlyOnEachNodeGetsTheirSets(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	names := []string{"cx-a", "cx-b", "cx-c"}
	held := holdAll(t, cl, names)
	sets := [][]string{{"cx-a", "cx-b"}, {"cx-b", "cx-c"}, {"cx-c", "cx-a"}}
	// delays[i][node]: M1 0/60/30, M2 30/0/60, M3 60/30/0 ms
	const ms = time.Millisecond
	delays := [][]time.Duration{{0, 40 * ms, 20 * ms}, {20 * ms, 0, 40 * ms}, {40 * ms, 20 * ms, 0}}
	const ttl = 300 * time.Millisecond
	res := make([]chan error, len(sets))
	var clients []*redlock.Client
	for i := range sets {
		hooks := map[int]redis.Hook{}
		for nd, d := range delays[i] {
			v := &atomic.Int64{}
			v.Store(int64(d))
			hooks[nd] = slowWire{v}
		}
		clients = append(clients, cl.hookedOn(t, hooks, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond)))
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	start := time.Now()
	var turns [3]atomic.Int32
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i, s := range sets {
		res[i] = make(chan error, 1)
		wg.Go(func() {
			m, err := clients[i].LockMulti(wctx, s)
			if err == nil {
				turns[i].Add(1)
				err = m.Unlock(ctx)
			}
			res[i] <- err
		})
	}
	for _, nm := range names {
		cl.inQueue(t, nm, 2)
	}
	time.Sleep(3 * ttl)
	for _, in := range cl.inspect {
		var line []string
		for _, nm := range names {
			z, _ := in.ZRangeWithScores(ctx, "redlock:{"+nm+"}:queue", 0, -1).Result()
			for _, e := range z {
				line = append(line, fmt.Sprintf("%s:%s@%.0f", nm[3:], e.Member.(string)[len(e.Member.(string))-1:], e.Score/1000))
			}
		}
		t.Logf("queues: %v", line)
	}
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	freed := time.Now()
	for i := range sets {
		if err := <-res[i]; err != nil {
			t.Errorf("multi-lock %v: every member free for %v, got nothing: %v", sets[i], time.Since(freed).Round(time.Millisecond), err)
		} else {
			t.Logf("multi-lock %v got its set %v after the members were freed", sets[i], time.Since(freed).Round(time.Millisecond))
		}
	}
	_ = start
}

// From the review, the no-deadlock argument needs a waiter's place to be the
// same in every member's queue. enqueueOn keeps a place per queue (min of
// now - waited over the joins), and release.lua drops a waiter that is not
// live from one member's queue only; it rejoins that queue with now - waited,
// which is later by however much slower that attempt's link was. Here M1's
// place in a is made 5 ms later than M2's (as such a rejoin leaves it), and
// liveness lapses (a stalled link) make the releases promise a to M1 and b
// to M2. Both are past their TTL, both live, every member free.
func TestKeepersWhosePlacesDifferPerQueueGetTheirSets(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	holder := cl.newClient(t, redlock.WithTTL(30*time.Second))
	ha, err := holder.TryLock(ctx, "dl-a")
	if err != nil {
		t.Fatal(err)
	}
	hb, err := holder.TryLock(ctx, "dl-b")
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 200 * time.Millisecond
	var g1, g2 atomic.Bool
	m1c := cl.hookedOn(t, map[int]redis.Hook{0: wireCut{&g1}, 1: wireCut{&g1}, 2: wireCut{&g1}}, redlock.WithTTL(ttl), redlock.WithRetryDelay(10*time.Millisecond, 2*time.Second))
	m2c := cl.hookedOn(t, map[int]redis.Hook{0: wireCut{&g2}, 1: wireCut{&g2}, 2: wireCut{&g2}}, redlock.WithTTL(ttl), redlock.WithRetryDelay(10*time.Millisecond, 2*time.Second))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res := make(chan string, 2)
	run := func(c *redlock.Client, who string) {
		m, err := c.LockMulti(wctx, []string{"dl-a", "dl-b"})
		if err == nil {
			_ = m.Unlock(ctx)
			res <- who + ": got the set"
			return
		}
		res <- fmt.Sprintf("%s: %v", who, err)
	}
	go run(m1c, "M1")
	cl.inQueue(t, "dl-a", 1)
	time.Sleep(20 * time.Millisecond)
	go run(m2c, "M2")
	cl.inQueue(t, "dl-a", 2)
	cl.inQueue(t, "dl-b", 2)
	time.Sleep(3 * ttl) // both past their TTL
	g1.Store(true)
	g2.Store(true)
	time.Sleep(200 * time.Millisecond) // in-flight attempts done
	qa, qb := "redlock:{dl-a}:queue", "redlock:{dl-b}:queue"
	sa, sb := "redlock:{dl-a}:queue:seen", "redlock:{dl-b}:queue:seen"
	for _, in := range cl.inspect {
		z, err := in.ZRangeWithScores(ctx, qa, 0, 1).Result()
		if err != nil || len(z) != 2 {
			t.Fatalf("queue of a: %v %v", z, err)
		}
		m1, m2 := z[0].Member.(string), z[1].Member.(string)
		// M1 rejoined a's queue 5 ms after M2's place (a slower link).
		in.ZAdd(ctx, qa, redis.Z{Score: z[1].Score + 5000, Member: m1})
		// Liveness lapsed: M2 in a's SEEN, M1 in b's SEEN.
		in.ZAdd(ctx, sa, redis.Z{Score: 1, Member: m2})
		in.ZAdd(ctx, sb, redis.Z{Score: 1, Member: m1})
	}
	// The holder releases: a's dead head (M2) is dropped and a promised to
	// M1; b's dead head (M1) is dropped and b promised to M2.
	if err := ha.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("after releases: a promised %v, b promised %v", cl.promisesOf(t, "dl-a"), cl.promisesOf(t, "dl-b"))
	for _, in := range cl.inspect {
		za, _ := in.ZRangeWithScores(ctx, qa, 0, -1).Result()
		zb, _ := in.ZRangeWithScores(ctx, qb, 0, -1).Result()
		t.Logf("queue a %v | queue b %v", za, zb)
	}
	g1.Store(false)
	g2.Store(false)
	freed := time.Now()
	time.Sleep(100 * time.Millisecond)
	t.Logf("100ms after: a promised %v, b promised %v", cl.promisesOf(t, "dl-a"), cl.promisesOf(t, "dl-b"))
	for _, in := range cl.inspect {
		za, _ := in.ZRangeWithScores(ctx, qa, 0, -1).Result()
		zb, _ := in.ZRangeWithScores(ctx, qb, 0, -1).Result()
		t.Logf("queue a %v | queue b %v", za, zb)
	}
	time.Sleep(time.Second)
	t.Logf("1 s after: a promised %v, b promised %v", cl.promisesOf(t, "dl-a"), cl.promisesOf(t, "dl-b"))
	for _, in := range cl.inspect {
		za, _ := in.ZRangeWithScores(ctx, qa, 0, -1).Result()
		zb, _ := in.ZRangeWithScores(ctx, qb, 0, -1).Result()
		t.Logf("queue a %v | queue b %v", za, zb)
	}
	r1, r2 := <-res, <-res
	t.Logf("%s; %s (%v after every member was freed)", r1, r2, time.Since(freed).Round(time.Millisecond))
	if r1[4:] != "got the set" && r2[4:] != "got the set" {
		t.Errorf("two live multi-locks over the free set {dl-a, dl-b} each kept one member for the other until ctx ended")
	}
}

// From the review: a keeper on long retry delays (its TTL far shorter than its
// sleeps): is it woken when the other member is released?
func TestAKeeperOnLongRetryDelaysIsWokenForItsOtherMember(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	holder := cl.newClient(t, redlock.WithTTL(30*time.Second))
	a, err := holder.TryLock(ctx, "rw6-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := holder.TryLock(ctx, "rw6-b")
	if err != nil {
		t.Fatal(err)
	}
	m := cl.newClient(t, redlock.WithTTL(200*time.Millisecond), redlock.WithRetryDelay(3*time.Second, 4*time.Second))
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		ml, err := m.LockMulti(wctx, []string{"rw6-a", "rw6-b"})
		if err == nil {
			err = ml.Unlock(ctx)
		}
		got <- err
	}()
	cl.inQueue(t, "rw6-a", 1)
	time.Sleep(600 * time.Millisecond)
	_ = a.Unlock(ctx)
	time.Sleep(500 * time.Millisecond)
	t.Logf("a kept: %v", cl.promisesOf(t, "rw6-a"))
	rel := time.Now()
	_ = b.Unlock(ctx)
	select {
	case err := <-got:
		t.Logf("set taken %v after b's release (retry delay 3-4 s): %v", time.Since(rel).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("keeper not woken")
	}
}
