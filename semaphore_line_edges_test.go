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

// The semaphore's line at its edges: a head that leaves or dies, a holder
// released in line, requests for n permits, a shrink, cluster nodes.

// lineMembers is the semaphore name's line on node i.
func (cl *cluster) lineMembers(t *testing.T, i int, name string) []string {
	t.Helper()
	m, err := cl.inspect[i].ZRange(context.Background(), "redlock:{"+name+"}:line:queue", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Found by review, fixed (liveness). The head of the line asks for 2 permits of 2 while one
// is held, so the single waiter behind it is held back although a permit
// is free. The head gives up (its ctx ends): it leaves the line on every
// node, but leaving wakes nobody (lua/leave.lua publishes only when the
// line's NEXT names the waiter, and a semaphore's line never sets NEXT).
// The single waiter, whose retry delay is long (as in the docs' own
// arrival-order replay, where only notifications serve the waiters),
// sleeps on with a permit free and nobody ahead of it, until its retry
// delay ends. The same happens when a dead head waiter's liveness lapses.
// Origin: the adversarial review of the semaphore's line (commit 8339419).
func TestLineHeadLeavingWakesNobody(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	const name = "leave-wake"
	holder := cl.newClient(t)
	if _, err := semaphore(t, holder, name, 2).TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	big := cl.newClient(t, redlock.WithRetryDelay(20*time.Second, 20*time.Second))
	bigDone := make(chan error, 1)
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	go func() {
		_, err := semaphore(t, big, name, 2).AcquireN(bctx, 2)
		bigDone <- err
	}()
	cl.inLine(t, name, 1)
	small := cl.newClient(t, redlock.WithRetryDelay(20*time.Second, 20*time.Second))
	smallDone := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 6*time.Second)
		defer cancel()
		p, err := semaphore(t, small, name, 2).Acquire(sctx)
		if err == nil {
			err = p.Release(ctx)
		}
		smallDone <- err
	}()
	cl.inLine(t, name, 2)
	bcancel() // the head gives up: a permit is free, and the single waiter is first now
	if err := <-bigDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the big request: %v, want context.Canceled", err)
	}
	left := time.Now()
	if err := <-smallDone; err != nil {
		t.Errorf("the single waiter behind a head that gave up, with a permit free: %v after %v "+
			"(nobody woke it: the leave of a line's head publishes nothing)", err, time.Since(left).Round(time.Millisecond))
	}
}

// Found by review, fixed (liveness/availability). A waiter granted on a majority but refused
// on a minority node joined the line there (sem_take.lua enqueue on a
// refusal), and nothing takes it out when it releases: SemRelease passes ""
// as the waiter (internal/lease/slot.go Release), unlike the mutex's Unlock
// which removes its holder from the queue on every node. The ghost stays at
// the head of that node's line for its whole liveness (its client's retry
// delay plus two node timeouts), and that node refuses every request,
// TryAcquire and waiters alike, although nobody holds anything. With one
// other node down the semaphore is unavailable although two nodes of three
// are up and no permit is held.
// Origin: the adversarial review of the semaphore's line (commit 8339419).
func TestLineReleasedHolderStaysInLine(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	const name = "ghost"
	// A leftover hold of the only slot on node 2 alone (a minority: the
	// rollback of an attempt that never reached it, or a paused holder's
	// key), about to expire.
	if err := cl.inspect[2].Set(ctx, "redlock:{"+name+"#0}", "stranger", 500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	h := cl.newClient(t, redlock.WithRetryDelay(10*time.Second, 10*time.Second))
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	p, err := semaphore(t, h, name, 1).Acquire(actx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // the stranger's key is gone: nothing is held anywhere
	// Release returns at the majority: on a loaded machine its call to node
	// 2 can still be on its way (seen beside a CPU-bound process). The ghost
	// this replays stays for its waiter's liveness, over 10 s here.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m := cl.lineMembers(t, 2, name)
		if len(m) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("node 2's line 3.7 s after the only holder released and nobody waits: %v, want empty", m)
			break
		}
	}
	resume := cl.pause(t, 0)
	defer resume()
	c := cl.newClient(t, redlock.WithNodeTimeout(200*time.Millisecond))
	q, err := semaphore(t, c, name, 1).TryAcquire(ctx)
	if err != nil {
		t.Errorf("TryAcquire of a free semaphore with 2 nodes of 3 up: %v (node 2 refuses for the released holder "+
			"still in its line)", err)
	} else {
		_ = q.Release(ctx)
	}
	resume()
}

// Found by review, fixed (cost). retryable (semaphore.go) is meant to stop a one-permit
// attempt lost to the line ("not to the line (a waiter ahead has the free
// slots on some node)"), but it checks only lostToPromises, which is never
// set for a TryAcquire (no waiter) nor when no node granted: a refusal by
// the line is retried on every slot the census finds free, one full round
// (and its rollback on every node) each. With a request for all 16 permits
// at the head of the line and one permit held, one TryAcquire costs 16
// rounds where one tells it all.
// Origin: the adversarial review of the semaphore's line (commit 8339419).
func TestLineTryAcquireRetriesEverySlotAgainstTheLine(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	const name, k = "amplify", 16
	holder := cl.newClient(t)
	if _, err := semaphore(t, holder, name, k).TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	big := cl.newClient(t, redlock.WithRetryDelay(20*time.Second, 20*time.Second))
	bctx, bcancel := context.WithCancel(ctx)
	bigDone := make(chan struct{})
	go func() {
		defer close(bigDone)
		_, _ = semaphore(t, big, name, k).AcquireN(bctx, k)
	}()
	defer func() { bcancel(); <-bigDone }()
	cl.inLine(t, name, 1)
	var n atomic.Int64
	c := cl.hookedOn(t, map[int]redis.Hook{0: countScript{name: "sem-acquire", n: &n}})
	_, err := semaphore(t, c, name, k).TryAcquire(ctx)
	if !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("TryAcquire behind a request for all %d: %v, want ErrLocked", k, err)
	}
	if got := n.Load(); got > 2 {
		t.Errorf("one TryAcquire refused by the line sent %d acquisitions to node 0 (each a round and a rollback "+
			"on every node), want at most 2", got)
	}
}

// HELD (safety). Mixed requests for 1..3 permits of 3, waiting and not,
// from six clients at once: no slot is ever granted while another holder
// holds it (tracked before Release is sent, so a conservative check), no
// request holds more slots than asked, and each slot's tokens only grow.
// Origin: the adversarial review of the semaphore's line (commit 8339419).
func TestLineMixedRequestsNeverOverlap(t *testing.T) {
	cl := startCluster(t, 3)
	const name, k = "mixed", 3
	var mu sync.Mutex
	holder := make([]string, k)
	lastTok := make([]uint64, k)
	var bad atomic.Int64
	var served atomic.Int64
	ctx, stop := context.WithTimeout(context.Background(), 4*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for w := range 6 {
		c := cl.newClient(t, redlock.WithTTL(2*time.Second), redlock.WithRetryDelay(time.Millisecond, 10*time.Millisecond))
		s := semaphore(t, c, name, k)
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				n := 1 + (w+i)%k
				var p *redlock.Permit
				var err error
				if i%3 == 0 {
					p, err = s.TryAcquireN(ctx, n)
				} else {
					actx, cancel := context.WithTimeout(ctx, time.Second)
					p, err = s.AcquireN(actx, n)
					cancel()
				}
				if err != nil {
					continue
				}
				served.Add(1)
				me := fmt.Sprintf("%d/%d", w, i)
				mu.Lock()
				if len(p.Slots()) != n {
					t.Errorf("asked %d, got slots %v", n, p.Slots())
					bad.Add(1)
				}
				for _, sl := range p.Slots() {
					if holder[sl] != "" {
						t.Errorf("slot %d granted to %s while %s holds it", sl, me, holder[sl])
						bad.Add(1)
					}
					holder[sl] = me
					if p.Token() <= lastTok[sl] {
						t.Errorf("slot %d: token %d not above %d", sl, p.Token(), lastTok[sl])
						bad.Add(1)
					}
					lastTok[sl] = p.Token()
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				for _, sl := range p.Slots() {
					holder[sl] = ""
				}
				mu.Unlock()
				_ = p.Release(context.Background())
			}
		})
	}
	wg.Wait()
	if served.Load() < 20 {
		t.Errorf("only %d requests served in 4 s", served.Load())
	}
	t.Logf("%d requests served", served.Load())
	// Nothing is left in the line once everyone is gone and the liveness
	// lapsed (the retry delays are short here).
	time.Sleep(500 * time.Millisecond)
	for i := range cl.inspect {
		if m := cl.lineMembers(t, i, name); len(m) != 0 {
			t.Logf("node %d: line after everyone left: %v", i, m)
		}
	}
}

// Found by review (liveness; the docs claimed "a waiter that died holds
// the line back [a promise period] at most"). A waiter whose process died
// sits at the head of the line (its entry as a crash leaves it: a place,
// and a liveness of 30 s). The holder releases: wakeLine spends the free
// permit on the dead head and caps its liveness to a promise period; when
// that lapses nothing wakes the live waiter behind it, which finds the
// permit at its next attempt, as the mutex's waiters find a promise nobody
// took (docs/semaphore.md now says so). The cap is what this holds: without
// it the dead entry would hold the permit for its 30 s.
// Origin: the adversarial review of the semaphore's line (commit 8339419).
func TestLineDeadHeadHoldsTheLineUntilTheNextRetry(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	const name = "dead-head"
	holder := cl.newClient(t)
	p, err := semaphore(t, holder, name, 1).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The dead waiter came first: its entry on every node.
	for _, in := range cl.inspect {
		tm, err := in.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		place := float64(tm.UnixMicro() - 1_000_000)
		live := float64(tm.UnixMilli() + 30_000)
		if err := in.ZAdd(ctx, "redlock:{"+name+"}:line:queue", redis.Z{Score: place, Member: "dead-client/1*1"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := in.ZAdd(ctx, "redlock:{"+name+"}:line:queue:seen", redis.Z{Score: live, Member: "dead-client/1*1"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	w := cl.newClient(t, redlock.WithRetryDelay(time.Second, time.Second))
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		defer cancel()
		q, err := semaphore(t, w, name, 1).Acquire(wctx)
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	cl.inLine(t, name, 2)
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := <-got; err != nil {
		t.Errorf("the live waiter behind a dead one, after the release: %v after %v, want served "+
			"at its next attempt after a promise period", err, time.Since(released).Round(time.Millisecond))
	}
}

// Found by review, fixed (liveness, mild). SetPermits shrinks 3 to 2 while a client built
// with 3 waits at the head of the line for all 3. Its entry asks for more
// than the semaphore now has, so every request of the new size is refused
// on every node (lineAhead: budget - 3 < 0) until that waiter's next retry
// (its retry delay: it is never woken, as wakeLine stops at it) finds
// ErrPermits and leaves; the new size's TryAcquire is ErrLocked meanwhile,
// with a permit free and nobody able to use it.
// Origin: the adversarial review of the semaphore's line (commit 8339419).
func TestLineShrinkBehindAnImpossibleHead(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	const name = "shrink-line"
	holder := cl.newClient(t)
	var hp *redlock.Permit
	for {
		p, err := semaphore(t, holder, name, 3).TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.Slot() < 2 {
			hp = p
			break
		}
		_ = p.Release(ctx) // keep a slot that survives the shrink
		time.Sleep(50 * time.Millisecond)
	}
	defer hp.Release(ctx)
	old := cl.newClient(t, redlock.WithRetryDelay(20*time.Second, 20*time.Second))
	octx, ocancel := context.WithCancel(ctx)
	oldDone := make(chan error, 1)
	go func() {
		_, err := semaphore(t, old, name, 3).AcquireN(octx, 3)
		oldDone <- err
	}()
	defer func() { ocancel(); <-oldDone }()
	cl.inLine(t, name, 1)
	nc := cl.newClient(t)
	s2 := semaphore(t, nc, name, 3)
	if err := s2.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	s2 = semaphore(t, nc, name, 2)
	var err error
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var p *redlock.Permit
		if p, err = s2.TryAcquire(ctx); err == nil {
			_ = p.Release(ctx)
			return
		}
	}
	t.Errorf("the new size's TryAcquire with a permit free, for 3 s: %v (held back by a waiter of the old size "+
		"asking for more permits than the semaphore has)", err)
}

// HELD. Cluster nodes without fencing: a semaphore whose name carries its
// hash tag serves n permits, and a waiter for n is woken by a release.
// Origin: the adversarial review of the semaphore's line (commit 8339419).
func TestLineClusterNodes(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	nodes := startClusterModeNodes(t, 3)
	ctx := context.Background()
	opts := []redlock.Option{redlock.WithoutFencing(), redlock.WithTTL(5 * time.Second),
		redlock.WithNodeTimeout(time.Second)}
	a, err := redlock.New(nodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := redlock.New(nodes, append(opts, redlock.WithRetryDelay(20*time.Second, 20*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, name := range []string{"jobs}", "a{b}c}"} {
		sa, err := a.Semaphore(name, 3)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		p, err := sa.TryAcquireN(ctx, 2)
		if err != nil {
			t.Fatalf("%q: TryAcquireN(2): %v", name, err)
		}
		sb, _ := b.Semaphore(name, 3)
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			q, err := sb.AcquireN(wctx, 3)
			if err == nil {
				err = q.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(300 * time.Millisecond)
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Errorf("%q: a waiter for 3 after the release of 2: %v", name, err)
		}
	}
	if _, err := a.Semaphore("x", 3); !errors.Is(err, redlock.ErrSpansSlots) {
		t.Errorf("%q on cluster nodes: %v, want ErrSpansSlots", "x", err)
	}
	// "{x}": every key's tag is "{x" (slots, size and line alike), so it
	// serves on cluster nodes.
	if s, err := a.Semaphore("{x}", 2); err != nil {
		t.Errorf("%q: %v", "{x}", err)
	} else if p, err := s.TryAcquireN(ctx, 2); err != nil {
		t.Errorf("%q: TryAcquireN(2): %v", "{x}", err)
	} else {
		_ = p.Release(ctx)
	}
}
