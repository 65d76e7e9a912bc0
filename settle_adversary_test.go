package redlock_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Replays from the adversarial review of Unlock returning at the majority
// (settle.go). Each failed against its first version.

// An Unlock of a stale handle (its lock expired, and the same client took
// the name again since) comes after the live lock's Unlock. Its release
// never wins, so it sets no until; when the client kept one release per
// name, it replaced the live one still in flight, the next attempt did not
// wait at all, and the counterexample of TestNextAttemptWaitsForItsOwnRelease
// came back (ErrLocked on a name nobody holds). Same delays as that test.
func TestStaleUnlockDoesNotHideTheReleaseInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale bool // the expired handle is unlocked after the live one
		opts  []redlock.Option
	}{
		{"unfenced/control", false, []redlock.Option{redlock.WithoutFencing()}},
		{"unfenced/stale unlock", true, []redlock.Option{redlock.WithoutFencing()}},
		{"fenced/control", false, nil},
		{"fenced/stale unlock", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startCluster(t, 3)
			var armed atomic.Bool
			opts := append([]redlock.Option{redlock.WithTTL(300 * time.Millisecond),
				redlock.WithNodeTimeout(50 * time.Millisecond), redlock.WithTrace(lateReleaseTrace(&armed))}, tc.opts...)
			c := cl.newClient(t, opts...)
			ctx := context.Background()
			for i := range 5 {
				old, err := c.TryLock(ctx, "stale")
				if err != nil {
					t.Fatalf("cycle %d: first TryLock: %v", i, err)
				}
				// Let it expire on every node, as a holder stalled past its TTL.
				<-old.Done()
				if h := cl.holdersOnceReleased(t, "stale"); slices.ContainsFunc(h, func(v string) bool { return v != "" }) {
					t.Fatalf("old lock never expired: %q", h)
				}
				live, err := c.TryLock(ctx, "stale")
				if err != nil {
					t.Fatalf("cycle %d: second TryLock: %v", i, err)
				}
				armed.Store(true)
				if err := live.Unlock(ctx); err != nil {
					t.Fatalf("cycle %d: Unlock: %v", i, err)
				}
				if tc.stale {
					// The late deferred Unlock of the expired handle.
					if err := old.Unlock(ctx); !errors.Is(err, redlock.ErrExpired) {
						t.Fatalf("cycle %d: stale Unlock: %v, want ErrExpired", i, err)
					}
				}
				l, err := c.TryLock(ctx, "stale")
				armed.Store(false)
				if err != nil {
					t.Fatalf("cycle %d: TryLock right after this client's Unlock: %v", i, err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("cycle %d: last Unlock: %v", i, err)
				}
				if !tc.stale {
					_ = old.Unlock(ctx)
				}
			}
		})
	}
}

// The settle wait must not spend a caller's short ctx when the nodes that
// released make a majority on their own. Five nodes, one release 100 ms
// late: four nodes are free at once, and an attempt wins there. When Unlock
// waited the grace itself (20 ms at a 200 ms node timeout), a TryLock with a
// 15 ms budget then won; the first settle wait spent that budget and failed
// with DeadlineExceeded, having sent nothing. Now a wait that ctx would cut
// short is not begun.
func TestSettleWaitLeavesTryLockItsBudget(t *testing.T) {
	cl := startCluster(t, 5)
	var armed atomic.Bool
	tr := &redlock.Trace{NodeCall: func(op string, node int) {
		if armed.Load() && op == "unlock" && node == 4 {
			time.Sleep(100 * time.Millisecond)
		}
	}}
	c := cl.newClient(t, redlock.WithoutFencing(), redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithTrace(tr))
	ctx := context.Background()
	for i := range 5 {
		l, err := c.TryLock(ctx, "budget")
		if err != nil {
			t.Fatalf("cycle %d: first TryLock: %v", i, err)
		}
		armed.Store(true)
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("cycle %d: Unlock: %v", i, err)
		}
		armed.Store(false)
		short, cancel := context.WithTimeout(ctx, 15*time.Millisecond)
		l, err = c.TryLock(short, "budget")
		cancel()
		if err != nil {
			t.Fatalf("cycle %d: TryLock(15 ms) right after Unlock, four of five nodes free: %v", i, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("cycle %d: second Unlock: %v", i, err)
		}
		time.Sleep(150 * time.Millisecond) // the straggler lands
	}
}

// The settle wait ends at a grace (three times the slowest reply) after the
// majority's last reply, but never past the time the collector gives up on
// silent nodes (lastReply + max(node timeout, slowest)), which is where
// Unlock's own wait for them used to end. Node timeout 160 ms, every release
// 150 ms slow (a loaded wire), node 2 paused after the acquisition: Unlock
// plus the next TryLock take about 2 x 150 ms; with the grace uncapped,
// about 4 x 150 ms.
func TestSettleWaitNoLongerThanUnlockUsedToWait(t *testing.T) {
	cl := startCluster(t, 3)
	var armed atomic.Bool
	slowRelease := scriptHook(func(ctx context.Context, script string) error {
		if armed.Load() && script == "release" {
			time.Sleep(150 * time.Millisecond)
		}
		return nil
	})
	c := cl.hooked(t, slowRelease, redlock.WithoutFencing(), redlock.WithNodeTimeout(160*time.Millisecond))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = c.TryLock(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 2)
	armed.Store(true)
	start := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	unlocked := time.Since(start)
	armed.Store(false)
	l, err = c.TryLock(ctx, "slow")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	t.Logf("Unlock returned after %v, the next TryLock after %v", unlocked, took)
	// Unlock used to wait at most about 2 x 150 ms here; the uncapped grace
	// made it about 4 x 150 ms.
	if took > 450*time.Millisecond {
		t.Errorf("Unlock + next TryLock took %v; Unlock alone used to wait at most ~310 ms", took)
	}
	resume()
	_ = l.Unlock(ctx)
}

// Entries of settling are dropped once every call of their release ended:
// with a node paused through Unlock and Close, with Unlock's ctx already
// cancelled, and over many names.
func TestSettlingEntriesAreDropped(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var held []*redlock.Lock
	for _, n := range names {
		l, err := c.TryLock(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	resume := cl.pause(t, 2)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for i, l := range held {
		uctx := ctx
		if i%2 == 1 {
			uctx = cancelled
		}
		err := l.Unlock(uctx)
		t.Logf("%s: %v", l.Name(), err)
	}
	if n := redlock.SettlingLen(c); n == 0 {
		t.Fatalf("no release in flight with node 2 paused")
	}
	c.Close()
	// The last calls to the paused node end about 5 s after Close here (measured alike
	// before and after the worker pool; it matches go-redis's 5 s dial timeout), and a
	// 6 s bound failed once in a loaded CI pass. Entries that were never dropped would
	// stay for good.
	deadline := time.Now().Add(12 * time.Second)
	for redlock.SettlingLen(c) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d names still settling 12 s after Close, node 2 still paused", redlock.SettlingLen(c))
		}
		time.Sleep(50 * time.Millisecond)
	}
	resume()
	if !redlock.WaitAbandoned(c, 5*time.Second) {
		t.Fatal("client goroutines still running")
	}
}
