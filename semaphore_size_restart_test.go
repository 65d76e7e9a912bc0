package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The semaphore's size through lagging nodes, restarts and repairs.

// storedPermits is the size each node stores for semaphore name ("" if none).
func storedPermits(t *testing.T, cl *cluster, name string) []string {
	t.Helper()
	out := make([]string, len(cl.inspect))
	for i, in := range cl.inspect {
		v, err := in.Get(context.Background(), "redlock:{"+name+"}:permits").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// A SetPermits that missed a node, and one node that later comes back
// without its data (the delayed restart kept: nothing was held on it).
// Before the size had a version, the old size then had a majority again:
// a client built with the size SetPermits replaced was granted three
// permits, and the new size was refused with ErrPermits. Now the old
// client learns the new size, and nobody holds a slot at or above it.
// Origin: the adversarial review of the semaphore and reentrancy.
func TestSemaphoreShrinkUndoneByALaggingNodeAndARestart(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	ctx := context.Background()
	opts := []redlock.Option{redlock.WithoutFencing(), redlock.WithNodeTimeout(200 * time.Millisecond)}
	c := cl.newClient(t, opts...)
	three := semaphore(t, c, "pool", 3)
	p, err := three.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(ctx)
	admin := cl.hookedOn(t, map[int]redis.Hook{2: unreachable{}}, opts...)
	if err := semaphore(t, admin, "pool", 2).SetPermits(ctx, 2); err != nil {
		t.Fatalf("SetPermits with node 2 unreachable: %v, want nil (a majority stored it)", err)
	}
	if p, err := three.TryAcquire(ctx); err != nil || three.Permits() != 2 {
		t.Fatalf("the old size right after SetPermits(2): %v, %d permits; want a permit under the new size 2", err, three.Permits())
	} else {
		_ = p.Release(ctx)
	}
	three = semaphore(t, c, "pool", 3) // and one that has not heard of it
	// Node 0 restarts empty; no permit was held, so the delayed restart is kept.
	if err := cl.inspect[0].FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var held []int
	var valid []*redlock.Permit
	for range 3 {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		p, err := three.Acquire(actx)
		cancel()
		if err != nil {
			t.Logf("old size: %v", err)
			break
		}
		held = append(held, p.Slot())
		defer p.Release(ctx)
		valid = append(valid, p)
		if n := validAtOnce(valid); n > 2 {
			t.Errorf("%d permits valid at once after SetPermits(2)", n)
		}
	}
	t.Logf("sizes stored: %q", storedPermits(t, cl, "pool"))
	if slices.ContainsFunc(held, func(i int) bool { return i >= 2 }) {
		t.Errorf("after SetPermits(2) succeeded, a client built with 3 holds slots %v (%d holders)", held, len(held))
	}
	if _, err := semaphore(t, c, "pool", 2).TryAcquire(ctx); errors.Is(err, redlock.ErrPermits) {
		t.Errorf("the size SetPermits stored is now refused: %v", err)
	}
}

// Without fencing nothing ties the retention to the TTL, yet the stored
// size lives only a retention after the last acquisition or extension: a
// permit held past it (a long TTL, or a Do that extends less often than
// the retention) leaves the size unchecked, and a client with another size
// stores its own and holds a second permit of a semaphore of one.
// Origin: the adversarial review of the semaphore and reentrancy.
func TestSemaphoreSizeExpiresUnderAHeldPermitWithoutFencing(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t, redlock.WithoutFencing(), redlock.WithTTL(5*time.Second), redlock.WithRetention(300*time.Millisecond))
	one, err := semaphore(t, c, "one", 1).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Release(ctx)
	time.Sleep(500 * time.Millisecond) // the permit has 4.5 s of validity left
	p, err := semaphore(t, c, "one", 2).TryAcquire(ctx)
	if err == nil {
		defer p.Release(ctx)
		t.Errorf("a semaphore of 1 with its permit held: a client built with 2 got slot %d too (sizes %q)",
			p.Slot(), storedPermits(t, cl, "one"))
	} else if !errors.Is(err, redlock.ErrPermits) {
		t.Errorf("another size while the permit is held: %v, want ErrPermits", err)
	}
	// A retention of 0 (meaningless without fencing, and accepted by New):
	// every acquisition fails with a script error.
	z := cl.newClient(t, redlock.WithoutFencing(), redlock.WithRetention(0))
	if p, err := semaphore(t, z, "zero", 1).TryAcquire(ctx); err != nil {
		t.Errorf("unfenced, WithRetention(0): %v", err)
	} else {
		_ = p.Release(ctx)
	}
}

// The same with fencing on: node 0 loses its data and is repaired (after
// the delayed restart, as Repair requires); it comes back without the
// semaphore's size, and the size SetPermits replaced wins again.
// Origin: the adversarial review of the semaphore and reentrancy.
func TestSemaphoreShrinkUndoneByALaggingNodeAndARepairFenced(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	opts := []redlock.Option{redlock.WithTTL(500 * time.Millisecond), redlock.WithNodeTimeout(100 * time.Millisecond)}
	c := cl.newClient(t, opts...)
	three := semaphore(t, c, "pool", 3)
	p, err := three.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(ctx)
	admin := cl.hookedOn(t, map[int]redis.Hook{2: unreachable{}}, opts...)
	if err := semaphore(t, admin, "pool", 2).SetPermits(ctx, 2); err != nil {
		t.Fatalf("SetPermits with node 2 unreachable: %v, want nil (a majority stored it)", err)
	}
	if p, err := three.TryAcquire(ctx); err != nil || three.Permits() != 2 {
		t.Fatalf("the old size right after SetPermits(2): %v, %d permits; want a permit under the new size 2", err, three.Permits())
	} else {
		_ = p.Release(ctx)
	}
	three = semaphore(t, c, "pool", 3) // and one that has not heard of it
	if err := cl.inspect[0].FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rep := cl.newClient(t, opts...)
	for deadline := time.Now().Add(15 * time.Second); ; {
		err := rep.Repair(ctx, 0, redlock.RepairAdopting()) // it lost all its data
		if err == nil {
			break
		}
		var soon *redlock.RepairTooSoonError
		if !errors.As(err, &soon) || time.Now().After(deadline) {
			t.Fatalf("Repair: %v", err)
		}
		time.Sleep(soon.Wait + 20*time.Millisecond)
	}
	var held []int
	var valid []*redlock.Permit
	for range 3 {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		p, err := three.Acquire(actx)
		cancel()
		if err != nil {
			t.Logf("old size: %v", err)
			break
		}
		held = append(held, p.Slot())
		defer p.Release(ctx)
		valid = append(valid, p)
		if n := validAtOnce(valid); n > 2 {
			t.Errorf("%d permits valid at once after SetPermits(2)", n)
		}
	}
	t.Logf("sizes stored: %q", storedPermits(t, cl, "pool"))
	if slices.ContainsFunc(held, func(i int) bool { return i >= 2 }) {
		t.Errorf("after SetPermits(2) succeeded, a client built with 3 holds slots %v (%d holders)", held, len(held))
	}
	if _, err := semaphore(t, c, "pool", 2).TryAcquire(ctx); errors.Is(err, redlock.ErrPermits) {
		t.Errorf("the size SetPermits stored is now refused: %v", err)
	}
}

// One node keeps a size SetPermits replaced (TestReviewSemStaleMinority...
// shows how it comes about). A permit's attempt on a held slot that hears
// that node's PERMITS refusal before a second holder's refusal is decided
// lost with one refusal only, and classified ErrUnavailable, not ErrLocked:
// TryAcquire then returns it without trying the free slots, and Acquire
// backs off as for an outage and gives up after WithMaxOutage, although
// every node is up and a slot is free.
// Origin: the adversarial review of the semaphore and reentrancy.
func TestSemaphoreStaleMinorityTurnsContentionIntoOutage(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t)
	p, err := semaphore(t, c, "q", 3).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(ctx)
	admin := cl.hookedOn(t, map[int]redis.Hook{2: unreachable{}})
	if err := semaphore(t, admin, "q", 2).SetPermits(ctx, 2); err != nil {
		t.Fatalf("SetPermits with node 2 unreachable: %v, want nil (a majority stored it)", err)
	}
	cl.holdAsStranger(t, "q#0", 0, 1, 2) // slot 0 held, slot 1 free
	// Node 1's replies come 50 ms late (a loaded link), nodes 0 and 2 answer at once.
	slow := cl.hookedOn(t, map[int]redis.Hook{1: afterHook(func(context.Context, string) { time.Sleep(50 * time.Millisecond) })},
		redlock.WithNodeTimeout(500*time.Millisecond))
	two := semaphore(t, slow, "q", 2)
	for i := range 12 {
		p, err := two.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("try %d: slot 1 free, every node up: %v", i, err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// validAtOnce is how many of permits are still valid now.
func validAtOnce(permits []*redlock.Permit) int {
	n := 0
	for _, p := range permits {
		if time.Until(p.Until()) > 0 {
			n++
		}
	}
	return n
}
