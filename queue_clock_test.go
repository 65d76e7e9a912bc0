package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

func startFakeClockCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return provisioned(t, startNodes(t, n, node.Config{FakeClock: true}))
}

// ADV3-6a: the nodes' clocks step back a minute (all nodes on one host, an
// NTP step). A waiter queued before the step now stands a minute behind
// every newcomer: newcomers take the lock turn after turn, the old waiter
// times out. Same starvation as issue 11 item 6, moved to node clocks.
func TestNodeClockStepBackDoesNotStarveAQueuedWaiter(t *testing.T) {
	cl := startFakeClockCluster(t, 3)
	opts := []redlock.Option{redlock.WithTTL(5 * time.Second), redlock.WithNodeTimeout(100 * time.Millisecond)}
	holder := cl.newClient(t, opts...)
	ctx := context.Background()
	h, err := holder.TryLock(ctx, "step")
	if err != nil {
		t.Fatal(err)
	}
	old := cl.newClient(t, opts...)
	got := lockAndUnlock(old, "step", 5*time.Second) // queued at node time T
	time.Sleep(300 * time.Millisecond)
	for _, nd := range cl.nodes {
		if err := nd.JumpClock(ctx, -time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	newcomers := cl.newClient(t, opts...)
	lctx, stop := context.WithTimeout(ctx, 8*time.Second)
	defer stop()
	var took atomic.Int64
	var loops sync.WaitGroup
	defer loops.Wait()
	defer stop()
	for range 3 {
		loops.Go(func() {
			for lctx.Err() == nil {
				l, err := newcomers.Lock(lctx, "step")
				if err != nil {
					return
				}
				took.Add(1)
				time.Sleep(2 * time.Millisecond)
				l.Unlock(context.Background())
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	h.Unlock(ctx)
	if err := <-got; err != nil {
		t.Errorf("waiter queued before the step: %v; newcomers acquired %d times meanwhile", err, took.Load())
	}
	t.Logf("newcomers acquired %d times", took.Load())
}

// Waiters that join a fraction of a millisecond apart keep their arrival
// order, whatever their ids. Places were in milliseconds: two waiters that
// joined within the same millisecond tied, and the tie went to the smaller
// id. A node whose clock put the two arrivals on either side of a
// millisecond boundary ordered them the other way, and releases then split
// their promises: in the contention benchmark, where waiters join a busy
// lock about half a millisecond apart, the worst waits were 5 to 8 times
// the median. "zz/1" joins, then "aa/1" right after, twenty times.
func TestPlacesKeepArrivalOrderWithinAMillisecond(t *testing.T) {
	cl := startCluster(t, 1)
	n, ctx := cl.clients[0], context.Background()
	inverted := 0
	for trial := range 20 {
		key := fmt.Sprintf("redlock:{order%d}", trial)
		if err := n.Set(ctx, key, "holder", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"zz/1", "aa/1"} {
			joinQueue(t, n, key, w, 1000)
		}
		if first := n.ZRange(ctx, key+":queue", 0, 0).Val(); len(first) != 1 || first[0] != "zz/1" {
			inverted++
		}
	}
	if inverted > 0 {
		t.Errorf("the waiter that joined second stood first in %d of 20 queues", inverted)
	}
}

// joinQueue runs the unfenced acquisition script on one node as waiter w of
// a client whose STALE is stale ms, with the lock key held by someone else:
// w joins the node's queue, as a refused Lock attempt does.
func joinQueue(t *testing.T, n redis.UniversalClient, key, w string, stale int) {
	t.Helper()
	keys := []string{key, key + ":released:v" + w, key + ":next", key + ":queue", key + ":queue:seen"}
	// EVAL, not go-redis's Script: its SHA-1 is refused in FIPS-only mode.
	if err := n.Eval(context.Background(), redlock.AcquireScript, keys, "v"+w, 60000, w, stale, 0).Err(); err != nil {
		t.Fatal(err)
	}
}
