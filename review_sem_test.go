package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Adversarial review of the semaphore and reentrancy (review_sem_test.go).

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

// (TestReviewSemStaleMinoritySizeIsNeverRepaired, the review's: a
// SetPermits that missed a node left it stale for ever, and the semaphore
// then survived no node's loss; its assertions are in
// TestSetPermitsNeedsAMajorityAndAcquisitionsRepairTheRest.)

// A SetPermits that missed a node, and one node that later comes back
// without its data (the delayed restart kept: nothing was held on it).
// Before the size had a version, the old size then had a majority again:
// a client built with the size SetPermits replaced was granted three
// permits, and the new size was refused with ErrPermits. Now the old
// client learns the new size, and nobody holds a slot at or above it.
func TestReviewSemShrinkUndoneByALaggingNodeAndARestart(t *testing.T) {
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
func TestReviewSemSizeExpiresUnderAHeldPermitWithoutFencing(t *testing.T) {
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

// Cluster clients are supported without fencing (WithoutFencing's doc,
// TestClusterClientsAsNodes); a semaphore is documented not to work on
// them (docs/semaphore.md: the size key and the slots' keys have different
// hash tags). But nothing refuses it: Semaphore accepts the client, and
// each attempt gets CROSSSLOT, reported as ErrFencingNode, "fencing needs
// standalone or Sentinel nodes ... use WithoutFencing", to a client that
// has no fencing. The error must name the semaphore's limitation.
func TestReviewSemClusterNodesWithoutFencing(t *testing.T) {
	nodes := startClusterModeNodes(t, 3)
	ctx := context.Background()
	c, err := redlock.New(nodes, redlock.WithoutFencing(), redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryLock(ctx, "mutex")
	if err != nil {
		t.Fatalf("a mutex on cluster nodes: %v", err)
	}
	_ = l.Unlock(ctx)
	s, err := c.Semaphore("sem", 2)
	if err != nil {
		return // refused up front: fine
	}
	p, err := s.TryAcquire(ctx)
	if err == nil {
		_ = p.Release(ctx)
		return
	}
	if errors.Is(err, redlock.ErrFencingNode) || strings.Contains(err.Error(), "use WithoutFencing") {
		t.Errorf("a permit on cluster nodes, client without fencing: %v", err)
	}
}

// MaxPermits slots in one census: with every slot but one held, the one
// free slot is found (passing: a regression test for the census).
func TestReviewSemCensusOfMaxPermits(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t)
	const free = 137
	for i := range redlock.MaxPermits {
		if i != free {
			cl.holdAsStranger(t, fmt.Sprintf("big#%d", i), 0, 1, 2)
		}
	}
	for range 5 {
		p, err := semaphore(t, c, "big", redlock.MaxPermits).TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.Slot() != free {
			t.Fatalf("got slot %d, want %d", p.Slot(), free)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Two reentrant Dos through one Lock's context, side by side: the first
// starts the watchdog, the second sees it and starts none. When the first
// returns, its watchdog stops: nobody extends the lock any more, and the
// second Do's function runs on with a context that is never cancelled,
// past the validity, while another client takes the lock.
func TestReviewReentrySiblingDoRunsWithoutWatchdog(t *testing.T) {
	cl := startCluster(t, 3)
	ttl := 600 * time.Millisecond
	c := cl.newClient(t, redlock.WithTTL(ttl))
	other := cl.newClient(t)
	ctx := context.Background()
	root, err := c.Lock(ctx, "sib")
	if err != nil {
		t.Fatal(err)
	}
	lctx := root.Context(ctx)
	aRunning, aEnd := make(chan struct{}), make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- c.Do(lctx, "sib", func(context.Context, *redlock.Lock) error {
			close(aRunning)
			<-aEnd
			return nil
		}, redlock.Reentrant())
	}()
	<-aRunning
	type report struct {
		cancelled bool
		stolen    bool
	}
	bDone := make(chan report, 1)
	go func() {
		var r report
		_ = c.Do(lctx, "sib", func(fctx context.Context, l *redlock.Lock) error {
			close(aEnd) // the first Do ends now
			deadline := time.After(4 * ttl)
			for {
				select {
				case <-fctx.Done():
					r.cancelled = true
					return nil
				case <-deadline:
					return nil
				case <-time.After(50 * time.Millisecond):
				}
				if ol, err := other.TryLock(ctx, "sib"); err == nil {
					r.stolen = true
					_ = ol.Unlock(ctx)
				}
			}
		}, redlock.Reentrant())
		bDone <- r
	}()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	r := <-bDone
	_ = root.Unlock(ctx)
	if r.stolen {
		t.Errorf("another client took the lock while a reentrant Do's function ran (its context cancelled: %v)", r.cancelled)
	}
	if r.cancelled {
		t.Errorf("the second Do's context was cancelled although it keeps the shared watchdog running (%v TTL, ran %v)", ttl, 4*ttl)
	}
}

// Do promises to release the lock when fn returns. With a reentry inside
// fn that is never unlocked (or unlocked later elsewhere), Do's Unlock
// only counts down and returns nil: Do returns, its watchdog is stopped,
// and the lock stays held until its TTL runs out. The design note says
// the outermost Unlock releases.
func TestReviewReentryDoReturnsWithTheLockStillHeld(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(3*time.Second))
	other := cl.newClient(t)
	ctx := context.Background()
	err := c.Do(ctx, "leak", func(ctx context.Context, _ *redlock.Lock) error {
		_, err := c.TryLock(ctx, "leak", redlock.Reentrant()) // a helper that forgets its Unlock
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := other.TryLock(ctx, "leak"); err != nil {
		t.Errorf("after Do returned nil, another client: %v (held by %q)", err, cl.holders(t, "leak"))
	} else {
		_ = l.Unlock(ctx)
	}
}

// A handle whose Unlock counted down still acts on the lock: its Extend
// succeeds (and with For moves the other holds' Until), and its Done stays
// open. Lock.Extend after Unlock is ErrReleased for every other lock.
func TestReviewReentryUnlockedHandleStillExtends(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(time.Minute))
	ctx := context.Background()
	outer, err := c.Lock(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock(ctx)
	inner, err := c.Lock(outer.Context(ctx), "h", redlock.Reentrant())
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	before := outer.Until()
	if err := inner.Extend(ctx, redlock.For(time.Second)); !errors.Is(err, redlock.ErrReleased) {
		t.Errorf("Extend of an unlocked inner handle: %v, want ErrReleased; the outer's Until moved %v -> %v",
			err, before.Format("15:04:05.000"), outer.Until().Format("15:04:05.000"))
	}
}

// The same with fencing on: node 0 loses its data and is repaired (after
// the delayed restart, as Repair requires); it comes back without the
// semaphore's size, and the size SetPermits replaced wins again.
func TestReviewSemShrinkUndoneByALaggingNodeAndARepairFenced(t *testing.T) {
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
func TestReviewSemStaleMinorityTurnsContentionIntoOutage(t *testing.T) {
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
