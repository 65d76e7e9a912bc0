package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Waiters that join at the same moment can stand in the nodes' queues in
// different orders, and a release then promises the lock to different
// waiters on different nodes: none can take a majority. Before the fix,
// nobody got the lock until the promises expired (two node timeouts), and
// the next release could split again; a herd of cron jobs firing at the
// same second hit it, as did the benchmark's contention step (waits of
// about 115 ms at the default node timeout). The replay orders three
// waiters differently on five nodes (the first is W1 on nodes 0 and 1, W2
// on 2 and 3, W3 on 4) and releases the lock: the promised waiters give
// their promises back (yieldPromise) and one of them takes it at once.
func TestSplitPromisesAreGivenBack(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced=%t", fenced), func(t *testing.T) {
			cl := startCluster(t, 5)
			// Promises last 1 s; a waiter not woken retries after 3 s at the
			// earliest, so only a notification can bring the lock sooner.
			opts := []redlock.Option{redlock.WithNodeTimeout(500 * time.Millisecond),
				redlock.WithRetryDelay(3*time.Second, 4*time.Second), redlock.WithTTL(10 * time.Second)}
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h, err := cl.newClient(t, opts...).TryLock(ctx, "split")
			if err != nil {
				t.Fatal(err)
			}
			acquired := make(chan time.Time, 3)
			errs := make(chan error, 3)
			for range 3 {
				w := cl.newClient(t, opts...)
				go func() {
					l, err := w.Lock(ctx, "split")
					if err != nil {
						errs <- err
						return
					}
					acquired <- time.Now()
					time.Sleep(time.Millisecond)
					errs <- l.Unlock(ctx)
				}()
			}
			queue := "redlock:{split}:queue"
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				queued := 0
				for _, in := range cl.inspect {
					if in.ZCard(ctx, queue).Val() == 3 {
						queued++
					}
				}
				if queued == len(cl.inspect) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the three waiters are not queued on every node")
				}
			}
			ids := cl.inspect[0].ZRange(ctx, queue, 0, -1).Val()
			for i, first := range []int{0, 0, 1, 1, 2} {
				for j, id := range ids {
					score := 2 + j
					if j == first {
						score = 1
					}
					cl.inspect[i].ZAdd(ctx, queue, redis.Z{Score: float64(score), Member: id})
				}
			}
			released := time.Now()
			if err := h.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-acquired:
				if d := at.Sub(released); d > 500*time.Millisecond {
					t.Errorf("the first waiter took the lock %v after the release (promises last 1 s)", d)
				}
			case err := <-errs:
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatal("no waiter took the lock")
			}
			for range 3 {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
		})
	}
}
