package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Issue 34's size counterexample, replayed: K=3 clients running; node 4
// down while SetPermits(2) runs (it stores 2 on the other four); node 4
// back with 3; nodes 0 and 1 restarted empty one at a time while the K=3
// clients keep acquiring. Before the size had a version, the running
// clients refilled nodes 0 and 1 with 3, the old size had a majority
// again (nodes 0, 1 and 4), and 3 permits were held at once after the
// size was set to 2. Now every running client learns the later size at
// its first refusal and repairs every node it reaches: after one TTL past
// SetPermits, never more than 2 are held.
func TestShrinkHoldsThroughALaggingNodeAndRestarts(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 5)
	ctx := context.Background()
	const ttl = 500 * time.Millisecond
	opts := []redlock.Option{redlock.WithoutFencing(), redlock.WithTTL(ttl), redlock.WithNodeTimeout(100 * time.Millisecond)}
	c := cl.newClient(t, opts...)

	var held, most atomic.Int64
	var checking atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := semaphore(t, c, "pool", 3) // built with the old size, never refreshed by hand
			for {
				select {
				case <-stop:
					return
				default:
				}
				actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				p, err := s.Acquire(actx)
				cancel()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if n := held.Add(1); checking.Load() && n > most.Load() {
					most.Store(n)
				}
				time.Sleep(10 * time.Millisecond)
				held.Add(-1)
				_ = p.Release(ctx)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(300 * time.Millisecond)

	// Node 4 is down for the admin: it never hears of SetPermits.
	admin := semaphore(t, cl.hookedOn(t, map[int]redis.Hook{4: unreachable{}}, opts...), "pool", 3)
	serr := admin.SetPermits(ctx, 2)
	time.Sleep(ttl) // the drain: slot 2's holders cannot extend
	checking.Store(true)
	for _, i := range []int{0, 1} {
		time.Sleep(200 * time.Millisecond)
		if err := cl.inspect[i].FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	if m := most.Load(); m > 2 {
		t.Errorf("%d permits held at once after SetPermits(2) and one TTL (sizes %q)", m, storedPermits(t, cl, "pool"))
	}
	if serr != nil {
		t.Errorf("SetPermits with 1 of 5 nodes down: %v, want nil (a majority stored it)", serr)
	}
	t.Logf("sizes stored at the end: %q", storedPermits(t, cl, "pool"))
}

// SetPermits needs a majority, not every node; a node it missed keeps the
// old size until an acquisition by a Semaphore that knows the new one
// reaches it, which repairs it. From then on the semaphore survives the
// loss of any one node again.
func TestSetPermitsNeedsAMajorityAndAcquisitionsRepairTheRest(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t, redlock.WithNodeTimeout(200*time.Millisecond))
	p, err := semaphore(t, c, "pool", 3).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(ctx)
	admin := cl.hookedOn(t, map[int]redis.Hook{2: unreachable{}})
	sa := semaphore(t, admin, "pool", 3)
	if err := sa.SetPermits(ctx, 2); err != nil {
		t.Fatalf("SetPermits with node 2 unreachable: %v, want nil (a majority stored it)", err)
	}
	if sa.Permits() != 2 || sa.Version() != 1 {
		t.Errorf("the Semaphore that set the size: %d permits at version %d, want 2 at 1", sa.Permits(), sa.Version())
	}
	if got := storedPermits(t, cl, "pool"); got[2] != "3" {
		t.Fatalf("node 2 missed SetPermits, yet stores %q", got[2])
	}
	two := semaphore(t, c, "pool", 2)
	if err := two.Refresh(ctx); err != nil || two.Version() != 1 {
		t.Fatalf("Refresh: %v, version %d, want 1", err, two.Version())
	}
	p, err = two.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(ctx)
	if got := storedPermits(t, cl, "pool"); got[2] != "2:1" {
		t.Errorf("node 2 after an acquisition at the new version: %q, want 2:1 (repaired)", got[2])
	}
	cl.pause(t, 0)
	if p, err := two.TryAcquire(ctx); err != nil {
		t.Errorf("a permit with node 0 down, nodes 1 and 2 up and at the new size: %v", err)
	} else {
		_ = p.Release(ctx)
	}
}

// A Semaphore built with the old size learns the later one from the
// nodes' refusal, and its call is made once more under it; one built with
// another size where no SetPermits wrote one is still refused (clients
// built with different numbers: no version says which is right).
func TestAnOldSizeLearnsTheLaterOneFromARefusal(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	three := semaphore(t, c, "k", 3)
	if err := semaphore(t, c, "k", 3).SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	p, err := three.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("the old size after SetPermits(2): %v, want the call made under the new size", err)
	}
	defer p.Release(ctx)
	if three.Permits() != 2 || three.Version() != 1 || p.Slot() >= 2 {
		t.Errorf("after the refusal: %d permits at version %d, slot %d; want 2 at 1, a slot below 2", three.Permits(), three.Version(), p.Slot())
	}
	if _, err := semaphore(t, c, "k", 3).AcquireN(ctx, 3); !errors.Is(err, redlock.ErrPermits) {
		t.Errorf("3 permits of a semaphore now of 2: %v, want ErrPermits", err)
	}
	semaphore(t, c, "v0", 3).TryAcquire(ctx)
	var pe *redlock.PermitsError
	if _, err := semaphore(t, c, "v0", 4).TryAcquire(ctx); !errors.As(err, &pe) || pe.Stored != 3 || pe.Version != 0 {
		t.Errorf("another size with none set: %v, want ErrPermits naming 3 at version 0", err)
	}
}

// Two SetPermits that read the same version: at most one stores its size on
// a majority; the other is told (ErrPermits or ErrUnavailable) and a
// SetPermits run again settles the size on every node.
func TestConcurrentSetPermitsSettle(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = semaphore(t, c, "k", 1).SetPermits(ctx, 2+i)
		}()
	}
	wg.Wait()
	if errs[0] == nil && errs[1] == nil {
		got := storedPermits(t, cl, "k")
		if got[0] != got[1] || got[1] != got[2] {
			t.Errorf("both SetPermits succeeded, yet the nodes store %q", got)
		}
	}
	if err := semaphore(t, c, "k", 1).SetPermits(ctx, 5); err != nil {
		t.Fatal(err)
	}
	got := storedPermits(t, cl, "k")
	if got[0] != got[1] || got[1] != got[2] {
		t.Errorf("after a SetPermits run again, the nodes store %q", got)
	}
	s := semaphore(t, c, "k", 1)
	if err := s.Refresh(ctx); err != nil || s.Permits() != 5 {
		t.Errorf("Refresh: %v, %d permits, want 5", err, s.Permits())
	}
}
