package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// From the adversarial review of the yield: a waiter promised the lock on
// a majority of the nodes loses its
// first attempt only because one of its promised nodes answers after the
// contention grace (a node a few ms slower than the others: the grace is
// nodeTimeout/10, 5 ms by default). The tally then holds granted 2, refused
// 2 (both promised to another waiter), no reply 1, and lostToPromises says
// yes: the waiter gives back the majority promise it could have used, and
// the waiters behind it took the lock. It must keep its promise and take
// the lock at its next attempt, as it did before the yield existed; now it
// yields only when others hold more than N - majority promises.
//
// Five nodes: W stands first on nodes 0-2, X on 3 and 4, Y last everywhere.
// W's client is slow for a moment after the release (its first call to node
// 2 takes 150 ms, its later calls 250 ms), which the promise (2 node
// timeouts, 1 s here) is there to absorb. It attempts once every node has
// released the lock, so that no refusal is by a node still held.
func TestMajorityPromiseSurvivesASlowNode(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced=%t", fenced), func(t *testing.T) {
			ctx, cl, opts, h := heldForWaiters(t, fenced, "slow")
			var armed atomic.Bool
			var attempts atomic.Int32
			yielded := make(chan struct{})
			var yieldOnce sync.Once
			// X tries after W's first attempt (once W gave its promise
			// back, or 300 ms), so that X's own attempt does not decide
			// what W's sees on nodes 3 and 4.
			var xFirst atomic.Bool
			xAfterW := &redlock.Trace{AttemptStart: func(string) {
				if armed.Load() && xFirst.CompareAndSwap(false, true) {
					select {
					case <-yielded:
					case <-time.After(300 * time.Millisecond):
					}
				}
			}}
			slowW := &redlock.Trace{
				AttemptStart: func(string) {
					if armed.Load() && attempts.Add(1) == 1 {
						// W wakes once every node has released the lock (and
						// promised it), as it would had it been a bit slower.
						allPromised(cl, "redlock:{slow}:next")
					}
				},
				NodeCall: func(op string, node int) {
					if op == "yield" {
						yieldOnce.Do(func() { close(yielded) })
					}
					if op != "lock" || !armed.Load() {
						return
					}
					switch n := attempts.Load(); {
					case n == 1 && node == 2:
						time.Sleep(150 * time.Millisecond)
					case n > 1:
						time.Sleep(250 * time.Millisecond)
					}
				},
			}
			ids, order, errs := startWaiters(ctx, t, cl, "slow",
				cl.newClient(t, append(slices.Clone(opts), redlock.WithTrace(slowW))...),
				cl.newClient(t, append(slices.Clone(opts), redlock.WithTrace(xAfterW))...),
				cl.newClient(t, opts...))
			armed.Store(true)
			releaseToMajorityOfW(ctx, t, cl, "slow", ids, h, errs)
			got := []string{"WXY"[<-order:][:1], "WXY"[<-order:][:1], "WXY"[<-order:][:1]}
			if got[0] != "W" {
				t.Errorf("order %v: W, promised the lock on nodes 0-2, was not first", got)
			}
		})
	}
}

// The same without a slow client. Node 2 stalls for 60 ms
// (SIGSTOP) just after it promised the lock to W; the node timeout is
// 100 ms, so the promise lasts 200 ms. Both W and X lose their first
// attempts to the stalled node and the other's promises, and both give
// their promises back: the lock then goes to whoever retries first.
// Twenty releases; W, promised the lock on nodes 0-2, should be first
// every time: nobody else can take a majority.
func TestMajorityPromiseSurvivesAStalledNode(t *testing.T) {
	cl := startCluster(t, 5)
	opts := []redlock.Option{redlock.WithRetryDelay(3*time.Second, 4*time.Second),
		redlock.WithNodeTimeout(100 * time.Millisecond), redlock.WithTTL(10 * time.Second), redlock.WithoutFencing()}
	jumped := 0
	for trial := range 20 {
		name := fmt.Sprintf("stall%d", trial)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var armed atomic.Bool
		resumed := make(chan struct{})
		stall := &redlock.Trace{NodeReply: func(op string, node int, _ redlock.NodeResult) {
			if op == "unlock" && node == 2 && armed.CompareAndSwap(true, false) {
				resume := cl.pause(t, 2)
				time.AfterFunc(60*time.Millisecond, func() { resume(); close(resumed) })
			}
		}}
		h, err := cl.newClient(t, append(slices.Clone(opts), redlock.WithTrace(stall))...).TryLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		heldEverywhere(t, cl, name)
		var clients []*redlock.Client
		for range 3 {
			clients = append(clients, cl.newClient(t, opts...))
		}
		ids, order, errs := startWaiters(ctx, t, cl, name, clients...)
		armed.Store(true)
		releaseToMajorityOfW(ctx, t, cl, name, ids, h, errs)
		if got := <-order; got != 0 {
			jumped++
		}
		<-resumed
		cancel()
	}
	if jumped > 0 {
		t.Errorf("W, promised the lock on nodes 0-2, was not first in %d of 20 releases", jumped)
	}
}

func waitQueued(t *testing.T, cl *cluster, queue string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		queued := 0
		for _, in := range cl.inspect {
			if in.ZCard(context.Background(), queue).Val() == n {
				queued++
			}
		}
		if queued == len(cl.inspect) {
			return
		}
		if time.Now().After(deadline) {
			for i, in := range cl.inspect {
				t.Logf("node %d: %v", i, in.ZRange(context.Background(), queue, 0, -1).Val())
			}
			t.Fatalf("%d waiters are not queued on every node", n)
		}
	}
}

// allPromised waits, for at most a second, until every node holds a promise.
func allPromised(cl *cluster, next string) {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n := 0
		for _, in := range cl.inspect {
			n += int(in.Exists(context.Background(), next).Val())
		}
		if n == len(cl.inspect) {
			return
		}
	}
}

// heldEverywhere waits until every node holds the lock (TryLock returns at
// a majority): a waiter granted on a free node is not queued there.
func heldEverywhere(t *testing.T, cl *cluster, name string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if !slices.Contains(cl.holders(t, name), "") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock is not held on every node: %v", cl.holders(t, name))
		}
	}
}

// releaseToMajorityOfW puts the waiters ids (W, X, Y) in the order W, X, Y
// on nodes 0-2 and X, W, Y on nodes 3 and 4, so that the release of h
// promises the lock to W on a majority; it releases h and waits for every
// waiter to take the lock and unlock it.
func releaseToMajorityOfW(ctx context.Context, t *testing.T, cl *cluster, name string, ids []string,
	h *redlock.Lock, errs <-chan error) {
	t.Helper()
	W, X, Y := ids[0], ids[1], ids[2]
	orderQueues(ctx, cl, name, [][]string{{W, X, Y}, {W, X, Y}, {W, X, Y}, {X, W, Y}, {X, W, Y}})
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
