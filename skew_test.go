package redlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// A client whose wall clock is a minute behind cannot jump the queue: the
// nodes order waiters by their own clocks. When the queue trusted the
// client's clock, three goroutines of such a client took the lock turn
// after turn and waiters of honest clients timed out.
func TestSkewedClientClockDoesNotStarveOthers(t *testing.T) {
	cl := startCluster(t, 3)
	opts := []redlock.Option{redlock.WithTTL(5 * time.Second), redlock.WithNodeTimeout(100 * time.Millisecond)}
	behind := &redlock.StepClock{}
	behind.Jump(-time.Minute) // monotonic differences stay right; only the wall reading is off
	skewed := cl.newClient(t, append(opts, redlock.WithClock(behind))...)

	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	var took atomic.Int64
	var loops sync.WaitGroup
	for range 3 {
		loops.Go(func() {
			for ctx.Err() == nil {
				l, err := skewed.Lock(ctx, "skew")
				if err != nil {
					return
				}
				took.Add(1)
				time.Sleep(2 * time.Millisecond)
				l.Unlock(context.Background())
			}
		})
	}
	defer loops.Wait()
	defer stop()
	time.Sleep(200 * time.Millisecond) // the skewed client's waiters are queued

	var results []<-chan error
	for range 3 {
		results = append(results, lockAndUnlock(cl.newClient(t, opts...), "skew", 5*time.Second))
	}
	for i, got := range results {
		if err := <-got; err != nil {
			t.Errorf("honest waiter %d: %v (the skewed client acquired %d times meanwhile)", i, err, took.Load())
		}
	}
	t.Logf("skewed client acquired %d times", took.Load())
}
