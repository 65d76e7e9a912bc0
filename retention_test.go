package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// The bounded-state revision of docs/fencing.md: a lock name's fencing state
// H expires R after its last commit, and the node counter G carries the
// order. These replay its traps on real nodes.

// A name idle past R loses its H everywhere; its next token still exceeds
// every earlier one, because A's commits raised G on their majority.
// Without the G raise in round 2 (lua/commit.lua) B's token comes out below.
func TestNameIdlePastRetentionKeepsItsOrder(t *testing.T) {
	cl := startCluster(t, 3)
	cl.withCounter(t, 0, 1000) // A's tokens come from n0's counter
	ctx := context.Background()
	const retention = 400 * time.Millisecond
	opts := []redlock.Option{redlock.WithTTL(100 * time.Millisecond), redlock.WithNodeTimeout(20 * time.Millisecond),
		redlock.WithRetention(retention)}
	a := cl.actor(t, []*faultHook{nil, nil, cut()}, opts...) // A reaches n0, n1
	// One acquisition: a later one's round 1 would also carry H's counter
	// to n1 (the safety net), and hide a missing raise in round 2.
	l, err := a.TryLock(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	last := l.Token()
	l.Unlock(ctx)
	time.Sleep(retention + 100*time.Millisecond)
	for i, c := range cl.inspect {
		if n, err := c.Exists(ctx, "redlock:{idle}:fence:high").Result(); err != nil || n != 0 {
			t.Fatalf("node %d still holds the name's H after R (%d, %v)", i, n, err)
		}
	}
	b := cl.actor(t, []*faultHook{cut(), nil, nil}, opts...) // B, later, reaches n1, n2
	// With a 20 ms node timeout a loaded machine can leave B without its
	// majority: a few more attempts raise n1's and n2's counters by a few,
	// far below A's 1000, so they hide nothing.
	for try := 0; ; try++ {
		l, err = b.TryLock(ctx, "idle")
		if err == nil {
			break
		}
		if !errors.Is(err, redlock.ErrUnavailable) || try == 10 {
			t.Fatal(err)
		}
	}
	defer l.Unlock(ctx)
	t.Logf("A got %d; B, after R, %d", last, l.Token())
	if l.Token() <= last {
		t.Fatalf("after the name idled past R: token %d, not above the last %d", l.Token(), last)
	}
}

// The repair intersection trap (N=3): B's round 1 reaches n0 first and is
// granted there; A is granted on n1, n2, commits on n0, n1 and unlocks; n1
// loses its data and is repaired; B's delayed round 1 is granted on n2 and
// its round 2 goes to n1, n2. Neither holds H for the name any more, but
// n1's repair floor E stands for every token a majority may have committed:
// B aborts. Without E (lua/commit.lua), B commits a token below A's although
// A committed before B was granted (M2).
func TestRepairFloorAbortsTheIntersectionTrap(t *testing.T) {
	cl := startCluster(t, 3)
	cl.withCounter(t, 1, 1000) // A's token comes from n1's counter
	ctx := context.Background()
	opts := []redlock.Option{redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(10 * time.Second)}

	bReachedN0 := make(chan struct{})
	releaseN2 := make(chan struct{})
	var once sync.Once
	b := cl.actor(t, []*faultHook{
		{before: func(s string) error {
			if s == "commit" {
				return errLinkCut
			}
			return nil
		}, after: func(s string) {
			if s == "acquire" {
				once.Do(func() { close(bReachedN0) })
			}
		}},
		cutScript("acquire"),
		{before: func(s string) error {
			if s == "acquire" {
				<-releaseN2
			}
			return nil
		}},
	}, opts...)
	a := cl.actor(t, []*faultHook{nil, nil, cutScript("commit")}, opts...)

	bDone := tryLockAsync(ctx, b, "trap")
	<-bReachedN0
	la, err := a.TryLock(ctx, "trap")
	if err != nil {
		close(releaseN2)
		t.Fatalf("A: %v", err)
	}
	la.Unlock(ctx)
	cl.restartEmpty(t, 1)
	if err := cl.newClient(t, opts...).Repair(ctx, 1, redlock.RepairWithoutDelay(), redlock.RepairAdopting()); err != nil {
		close(releaseN2)
		t.Fatal(err)
	}
	close(releaseN2)
	rb := <-bDone
	if rb.err == nil {
		defer rb.l.Unlock(ctx)
		t.Fatalf("A committed %d before B was granted; B got %d", la.Token(), rb.l.Token())
	}
	if !errors.Is(rb.err, redlock.ErrSuperseded) {
		t.Fatalf("B: %v, want ErrSuperseded", rb.err)
	}
	t.Logf("A committed %d; B aborted: %v", la.Token(), rb.err)
}

// A round 2 delayed past R: by then H may have expired on the nodes it
// reaches, and the proof of M2 rests on the attempt's validity being gone.
// It is: the attempt fails and leaves nothing locked.
func TestRoundTwoDelayedPastRetentionFails(t *testing.T) {
	cl := startCluster(t, 3)
	const ttl, retention = 100 * time.Millisecond, 300 * time.Millisecond
	c := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(20*time.Millisecond), redlock.WithRetention(retention),
		redlock.WithTrace(&redlock.Trace{RoundTwo: func(string, uint64) { time.Sleep(retention + 50*time.Millisecond) }}))
	if l, err := c.TryLock(context.Background(), "late"); !errors.Is(err, redlock.ErrNoValidity) {
		if l != nil {
			l.Unlock(context.Background())
		}
		t.Fatalf("round 2 after R: %v, want ErrNoValidity", err)
	}
	c.Close()
	for i, v := range cl.holders(t, "late") {
		if v != "" {
			t.Errorf("node %d holds %q", i, v)
		}
	}
}

// 10,000 fenced names, each locked and released once: once R (and the
// release markers' 10 TTLs) have passed the nodes hold a constant number of keys (the node's identity and
// counters), not two keys per name as before the revision.
func TestFencedNamesLeaveNothingBehind(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 5)
	ctx := context.Background()
	const names, retention, ttl = 10000, 1500 * time.Millisecond, 500 * time.Millisecond
	c := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond),
		redlock.WithRetention(retention))
	var wg sync.WaitGroup
	errs := make(chan error, names)
	for w := range 16 {
		wg.Go(func() {
			for k := w; k < names; k += 16 {
				l, err := c.TryLock(ctx, fmt.Sprintf("order:%d", k))
				if err != nil {
					errs <- err
					continue
				}
				if err := l.Unlock(ctx); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed == 1 {
			t.Logf("first failure: %v", err)
		}
	}
	if failed > names/100 {
		t.Fatalf("%d of %d lock+unlock cycles failed", failed, names)
	}
	var during []int64
	for _, n := range cl.inspect {
		k, _ := n.DBSize(ctx).Result()
		during = append(during, k)
	}
	// Once R has passed, and the release markers of attempts rolled back
	// under contention (10 TTLs) have expired too.
	time.Sleep(max(retention, 10*ttl) + 200*time.Millisecond)
	for i, n := range cl.inspect {
		k, err := n.DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if k > 10 {
			keys, _ := n.Keys(ctx, "*").Result()
			t.Fatalf("node %d holds %d keys after R (%d right after the locks), e.g. %v", i, k, during[i], keys[:min(5, len(keys))])
		}
		t.Logf("node %d: %d keys right after %d names, %d once R passed", i, during[i], names, k)
	}
}

// The design reference says U and M1 need no timing assumption. Across a
// Repair they do: A's commit to k is still in flight when j (already
// committed) loses its data; a repair at once reads G from k and l before
// A's commit lands on k, so j comes back below A's token; A's commit then
// lands, A returns, and B, later, is granted on j and l with a smaller
// token. Waiting out the delayed restart (the longest TTL) closes it: by
// then A has returned or failed. The first case runs RepairWithoutDelay to
// show the hole the delay closes.
func TestRepairNeedsTheDelayForRealTimeOrder(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	for _, tc := range []struct {
		name   string
		atOnce bool
	}{{"repaired at once", true}, {"repaired after the delay", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startCluster(t, 3) // j = n0, k = n1, l = n2
			cl.withCounter(t, 0, 1000)
			ctx := context.Background()
			const ttl = time.Second
			opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(300 * time.Millisecond)}
			commitToK := make(chan struct{})
			heldK, onJ := make(chan struct{}), make(chan struct{})
			var onceK, onceJ sync.Once
			a := cl.actor(t, []*faultHook{{after: func(s string) {
				if s == "commit" {
					onceJ.Do(func() { close(onJ) })
				}
			}}, {before: func(s string) error {
				if s == "commit" {
					onceK.Do(func() { close(heldK) })
					<-commitToK
				}
				return nil
			}}, cut()}, append(opts, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(600*time.Millisecond))...)
			aDone := tryLockAsync(ctx, a, "order")
			<-heldK // A's commit is on j; the one to k waits
			<-onJ
			cl.restartEmpty(t, 0)
			admin := cl.newClient(t, opts...)
			if tc.atOnce {
				if err := admin.Repair(ctx, 0, redlock.RepairWithoutDelay(), redlock.RepairAdopting()); err != nil {
					close(commitToK)
					t.Fatal(err)
				}
				close(commitToK)
			} else {
				var soon *redlock.RepairTooSoonError
				if err := admin.Repair(ctx, 0, redlock.RepairAdopting()); !errors.As(err, &soon) {
					close(commitToK)
					t.Fatalf("Repair at once: %v, want RepairTooSoonError", err)
				}
				close(commitToK)
				time.Sleep(soon.Wait)
			}
			ra := <-aDone
			if ra.err != nil {
				t.Fatalf("A: %v", ra.err)
			}
			ra.l.Unlock(ctx)
			if !tc.atOnce {
				if err := admin.Repair(ctx, 0, redlock.RepairAdopting()); err != nil {
					t.Fatalf("Repair after the delay: %v", err)
				}
			}
			b := cl.actor(t, []*faultHook{nil, cut(), nil}, opts...) // B, after A returned: j and l
			lb, err := b.TryLock(ctx, "order")
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			defer lb.Unlock(ctx)
			broken := lb.Token() <= ra.l.Token()
			t.Logf("A returned %d; B, invoked later, got %d", ra.l.Token(), lb.Token())
			if broken != tc.atOnce {
				t.Fatalf("B's token below A's = %v, want %v", broken, tc.atOnce)
			}
		})
	}
}
