package redlock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// A paused node is not sent call after call: once its calls have gone
// unanswered past the node timeout, the others skip it (ErrNodeHung), so a
// busy client does not pile up a stuck goroutine, a connection and a
// background release per lock. It gets calls again as soon as it answers,
// and what was sent to it before is released there.
func TestHungNodeIsSkippedUntilItAnswers(t *testing.T) {
	cl := startCluster(t, 3)
	var mu sync.Mutex
	var last []redlock.NodeResult
	c := cl.newClient(t, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(50*time.Millisecond),
		redlock.WithObserver(redlock.ObserverFunc(func(_ context.Context, e redlock.Event) {
			if e.Op == "lock" {
				mu.Lock()
				last = e.Nodes
				mu.Unlock()
			}
		})))
	node2 := func() redlock.NodeResult {
		mu.Lock()
		defer mu.Unlock()
		return last[2]
	}
	ctx := context.Background()
	cycle := func() {
		t.Helper()
		l, err := c.TryLock(ctx, "hung")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // connections dialled, node ids known
	resume := cl.pause(t, 2)
	before := runtime.NumGoroutine()
	const cycles = 200
	skipped := 0
	for range cycles {
		cycle()
		if r := node2(); errors.Is(r.Err, redlock.ErrNodeHung) {
			if r.Outcome != redlock.NodeTimedOut || !errors.Is(r.Err, redlock.ErrNodeTimeout) {
				t.Fatalf("skipped node reported as %v, %v", r.Outcome, r.Err)
			}
			skipped++
		}
	}
	grown := runtime.NumGoroutine() - before
	// The first cycles, within one node timeout of the pause, are still sent.
	if skipped < cycles*3/4 {
		t.Errorf("paused node skipped in %d of %d cycles", skipped, cycles)
	}
	if grown > cycles/4 {
		t.Errorf("%d more goroutines after %d cycles with a node paused", grown, cycles)
	}

	resume()
	deadline := time.Now().Add(5 * time.Second)
	for cycle(); node2().Outcome != redlock.NodeGranted; cycle() {
		if time.Now().After(deadline) {
			t.Fatalf("resumed node still not used 5 s later: %+v", node2())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// What was sent to it while it was paused lands on resume and is
	// released there.
	for {
		err := cl.inspect[2].Get(ctx, "redlock:{hung}").Err()
		if errors.Is(err, redis.Nil) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock key still on the resumed node: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
