package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// A waiter woken by a promise takes the lock once a majority of the nodes
// have promised it, not at the first promise. The holder's release reaches
// nodes 0 and 1 at once and nodes 2-4 40 ms later (its Trace holds those
// calls). Attempting at the first promise, the waiter met nodes 2-4 still
// held, lost, rolled back and tried again with short delays until the
// release landed: three to five attempts where one does. The promise wait
// is bounded by a tenth of the node timeout, 200 ms here.
func TestWokenWaiterWaitsForAMajorityOfPromises(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced=%t", fenced), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			g := newGatherSetup(ctx, t, fenced, "gather", 2*time.Second, 40*time.Millisecond)
			done := make(chan error, 1)
			go func() {
				l, err := g.waiter.Lock(ctx, "gather")
				if err == nil {
					err = l.Unlock(ctx)
				}
				done <- err
			}()
			before := g.waitAsleep(t, "gather")
			g.armed.Store(true)
			if err := g.holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the waiter: %v", err)
			}
			if n := g.attempts.Load() - before; n != 1 {
				t.Errorf("the waiter made %d attempts after the release, want 1", n)
			}
		})
	}
}

// A waiter whose context ends while it gathers promises (promised on a
// minority, the release still on its way to the others) returns at once
// with a *QuorumError whose Cause is the context's error, and leaves
// nothing behind: no lock of its own, no place in the queues, no promise.
func TestLockCancelledWhileGatheringPromises(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced=%t", fenced), func(t *testing.T) {
			bg, stop := context.WithTimeout(context.Background(), 20*time.Second)
			defer stop()
			// The gather lasts up to a tenth of the node timeout: 300 ms.
			g := newGatherSetup(bg, t, fenced, "gc", 3*time.Second, time.Second)
			cl, h, attempts := g.cl, g.holder, &g.attempts
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				l, err := g.waiter.Lock(ctx, "gc")
				if err == nil {
					l.Unlock(bg)
				}
				done <- err
			}()
			before := g.waitAsleep(t, "gc")
			g.armed.Store(true)
			unlocked := make(chan error, 1)
			go func() { unlocked <- h.Unlock(bg) }()
			// Nodes 0 and 1 promise W; 2-4 still hold the lock.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				n := 0
				for _, in := range cl.inspect[:2] {
					n += int(in.Exists(bg, "redlock:{gc}:next").Val())
				}
				if n == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("nodes 0 and 1 did not promise the lock")
				}
			}
			time.Sleep(50 * time.Millisecond) // W hears the promises and gathers
			cancel()
			cancelled := time.Now()
			select {
			case err := <-done:
				var qe *redlock.QuorumError
				if !errors.As(err, &qe) || qe.Cause != context.Canceled {
					t.Fatalf("Lock: %v, want a *QuorumError with Cause context.Canceled", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Lock did not return 2 s after its context ended")
			}
			if d := time.Since(cancelled); d > 100*time.Millisecond {
				t.Errorf("Lock returned %v after its context ended", d)
			}
			if n := attempts.Load() - before; n != 0 {
				t.Errorf("W attempted %d times while it gathered, want 0", n)
			}
			if err := <-unlocked; err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				left := 0
				for _, in := range cl.inspect {
					left += int(in.Exists(bg, "redlock:{gc}", "redlock:{gc}:next", "redlock:{gc}:queue").Val())
				}
				if left == 0 {
					break
				}
				if time.Now().After(deadline) {
					for i, in := range cl.inspect {
						t.Logf("node %d: lock %q next %q queue %v", i, in.Get(bg, "redlock:{gc}").Val(),
							in.Get(bg, "redlock:{gc}:next").Val(), in.ZRange(bg, "redlock:{gc}:queue", 0, -1).Val())
					}
					t.Fatal("the cancelled waiter left something behind")
				}
			}
		})
	}
}

// gatherSetup is a lock held on five nodes by a client whose release, once
// armed, reaches nodes 2-4 late, and a waiter's client that counts its
// attempts.
type gatherSetup struct {
	cl       *cluster
	holder   *redlock.Lock
	waiter   *redlock.Client
	attempts atomic.Int32
	armed    atomic.Bool
}

func newGatherSetup(ctx context.Context, t *testing.T, fenced bool, name string, nodeTimeout, late time.Duration) *gatherSetup {
	t.Helper()
	g := &gatherSetup{cl: startCluster(t, 5)}
	opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeout),
		redlock.WithRetryDelay(5*time.Second, 6*time.Second), redlock.WithTTL(30 * time.Second)}
	if !fenced {
		opts = append(opts, redlock.WithoutFencing())
	}
	slowRelease := &redlock.Trace{NodeCall: func(op string, node int) {
		if op == "unlock" && node >= 2 && g.armed.Load() {
			time.Sleep(late)
		}
	}}
	h, err := g.cl.newClient(t, append(slices.Clone(opts), redlock.WithTrace(slowRelease))...).TryLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	g.holder = h
	heldEverywhere(t, g.cl, name)
	counted := redlock.WithObserver(redlock.ObserverFunc(func(_ context.Context, ev redlock.Event) {
		if ev.Op == "lock" {
			g.attempts.Add(1)
		}
	}))
	g.waiter = g.cl.newClient(t, append(slices.Clone(opts), counted)...)
	return g
}

// waitAsleep waits until the waiter's Lock sleeps: it is queued on every
// node, its first attempt was refused, and it looked once more when its
// subscription took effect. It returns the attempts made so far.
func (g *gatherSetup) waitAsleep(t *testing.T, name string) int32 {
	t.Helper()
	waitQueued(t, g.cl, "redlock:{"+name+"}:queue", 1)
	for g.attempts.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return g.attempts.Load()
}
