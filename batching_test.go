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

// A node paused (SIGSTOP) with 500 goroutines' calls batched to it, most
// riding their batches with no goroutine of their own (issue 33): the
// other nodes' calls go on, every TryLock and Unlock succeeds on them,
// and once the node resumes nothing is left locked there (the adversarial
// review of the riding calls replayed this).
func TestAPausedNodeWith500CallsBatchedHoldsOnlyItsOwn(t *testing.T) {
	cl := startCluster(t, 3)
	c, err := redlock.New(cl.clients, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resume := cl.pause(t, 0)
	defer resume()
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := range 500 {
		wg.Go(func() {
			ctx := context.Background()
			l, err := c.TryLock(ctx, fmt.Sprintf("p500-%d", g))
			if err == nil {
				err = l.Unlock(ctx)
			}
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("with one node of three paused, a cycle failed: %v", err)
	}
	resume()
	// The paused node's calls land once it resumes, and its releases are
	// retried: give them the node timeouts they take, not the TTL.
	ctx := context.Background()
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		for i, in := range cl.inspect {
			keys, err := in.Keys(ctx, "redlock:{p500-*}").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if k[len(k)-1] == '}' { // the lock key itself, not a marker
					left = append(left, fmt.Sprintf("node %d: %s", i, k))
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("%d locks left after the node resumed, e.g. %v", len(left), left[0])
	}
}

// SCRIPT FLUSH on every node, again and again, under 64 goroutines' lock
// and unlock cycles: a call riding a batch that meets NOSCRIPT runs whole
// and sends the script's source, and no cycle fails (the adversarial
// review of the riding calls replayed this).
func TestScriptFlushesUnderLoadFailNoCycle(t *testing.T) {
	cl := startCluster(t, 3)
	c, err := redlock.New(cl.clients, redlock.WithTTL(10*time.Second), redlock.WithoutFencing())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	flushed := make(chan int)
	go func() {
		n := 0
		defer func() { flushed <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for _, in := range cl.inspect {
				if in.ScriptFlush(context.Background()).Err() == nil {
					n++
				}
			}
		}
	}()
	var wg sync.WaitGroup
	var cycles atomic.Int64
	var failed atomic.Value
	end := time.Now().Add(2 * time.Second)
	for g := range 64 {
		wg.Go(func() {
			ctx := context.Background()
			for i := 0; time.Now().Before(end); i++ {
				l, err := c.TryLock(ctx, fmt.Sprintf("flush-%d-%d", g, i))
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				cycles.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	n := <-flushed
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("a cycle failed with the nodes' scripts flushed under it: %v", err)
	}
	if cycles.Load() == 0 || n == 0 {
		t.Fatalf("%d cycles, %d flushes: the test exercised nothing", cycles.Load(), n)
	}
	t.Logf("%d cycles, %d flushes", cycles.Load(), n)
}
