package redlock_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// workerCount is how many of the process's goroutines are node-call
// workers (internal/round/workers.go), running or idle.
func workerCount() int {
	buf := make([]byte, 1<<24)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "round.(*workers).work(") {
			n++
		}
	}
	return n
}

// The workers of a burst end once the burst is over, even while the client
// goes on taking locks at a steady pace: a steady pace needs a handful of
// workers. A job went to the worker that had been idle longest (a channel
// hands its sends to its receivers in the order they began to wait), so
// every worker of the burst took a call now and then, none stayed idle for
// the second that ends it, and a client that once had a burst of 200
// concurrent locks kept 600 goroutines for as long as it took one lock
// every few milliseconds.
func TestBurstWorkersEndUnderASteadyPace(t *testing.T) {
	cl := startCluster(t, 3)
	// Without batching every call takes a worker: with it, calls that
	// ride a busy node's next batch take none, and how many workers a
	// burst starts depends on the machine's load (53 of the 60 needed in
	// one CI run).
	c := cl.newClient(t, redlock.WithoutFencing(), redlock.WithoutBatching())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 200 {
		wg.Go(func() {
			<-start
			l, err := c.TryLock(ctx, fmt.Sprintf("burst%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			l.Unlock(ctx)
		})
	}
	close(start)
	wg.Wait()
	burst := workerCount()
	if burst < 60 {
		t.Fatalf("the burst started only %d workers", burst)
	}
	// One lock every 2 ms, for 3 s: three times the idle limit.
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		l, err := c.TryLock(ctx, "steady")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if n := workerCount(); n > 30 {
		t.Errorf("%d workers after 3 s at a steady pace that needs a few (%d after the burst)", n, burst)
	} else {
		t.Logf("%d workers after the burst, %d after 3 s at a steady pace", burst, n)
	}
}

// Close returns once every goroutine of the client has ended (Client.stopped
// says so), idle workers included: a check for leaks right after Close, with
// no retries, finds none.
func TestCloseEndsTheIdleWorkers(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 5 {
		c := cl.newClient(t, redlock.WithoutFencing())
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				l, err := c.TryLock(ctx, fmt.Sprintf("close%d", i))
				if err != nil {
					t.Error(err)
					return
				}
				l.Unlock(ctx)
			})
		}
		wg.Wait()
		time.Sleep(100 * time.Millisecond) // the releases settle
		if workerCount() == 0 {
			t.Fatalf("round %d: no idle workers before Close: workerCount no longer finds them", round)
		}
		c.Close()
		// A worker that has signalled its end may still be returning from
		// its last frame for a moment on a loaded machine: a few ms, not
		// the idle limit, which is what leaked workers would take.
		n := workerCount()
		for deadline := time.Now().Add(200 * time.Millisecond); n != 0 && time.Now().Before(deadline); n = workerCount() {
			time.Sleep(5 * time.Millisecond)
		}
		if n != 0 {
			t.Fatalf("round %d: %d workers still running 200 ms after Close returned", round, n)
		}
	}
}
