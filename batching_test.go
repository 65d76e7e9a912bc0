package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Close while many goroutines' calls are batched to the nodes (issue 33):
// every call returns, with its result or ErrClosed, and every goroutine of
// the client, the batches' included, ends (goleak checks the rest).
func TestCloseWithBatchesInFlight(t *testing.T) {
	cl := startCluster(t, 5)
	c, err := redlock.New(cl.clients, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var ok, closed atomic.Int64
	var other atomic.Value
	for g := range 200 {
		wg.Go(func() {
			for i := 0; ; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				l, err := c.TryLock(ctx, fmt.Sprintf("close-%d-%d", g, i))
				if err == nil {
					err = l.Unlock(ctx)
				}
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, redlock.ErrClosed):
					closed.Add(1)
					return
				default:
					other.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	// Close once cycles are completing (not after a fixed time: on a busy
	// machine the first ones can take longer than any fixed wait).
	for deadline := time.Now().Add(30 * time.Second); ok.Load() == 0 && other.Load() == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	c.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("calls still running 10 s after Close")
	}
	if !redlock.WaitAbandoned(c, 10*time.Second) {
		t.Fatal("the client's goroutines did not end within 10 s of Close")
	}
	if err, _ := other.Load().(error); err != nil {
		// A release cut by Close says so; anything else is a failure.
		if !errors.Is(err, redlock.ErrUnavailable) {
			t.Errorf("a call failed with %v, neither its result nor ErrClosed", err)
		}
	}
	if ok.Load() == 0 {
		t.Errorf("no cycle completed before Close (%d closed): nothing was batched", closed.Load())
	}
}

// Batching changes no outcome: the same cycles with it turned off
// (WithoutBatching) succeed as they do with it, on shared and separate
// names, fenced and not.
func TestWithoutBatchingSendsEachCallAlone(t *testing.T) {
	cl := startCluster(t, 3)
	for _, opts := range [][]redlock.Option{{redlock.WithoutBatching()}, {redlock.WithoutBatching(), redlock.WithoutFencing()}} {
		c := cl.newClient(t, append(opts, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))...)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				ctx := context.Background()
				for i := range 20 {
					l, err := c.Lock(ctx, fmt.Sprintf("alone-%d", (g+i)%4))
					if err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
					}
				}
			})
		}
		wg.Wait()
	}
}
