package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Bounded per-name state after the retention, for the lock family under
// contention: the waiting lines, queues, marks of waiting readers and
// multi-locks, reader sets, sizes, tokens and release markers all expire.
// What is left on each node is its own fencing state (a handful of keys).
func TestFamilyLeavesNothingBehind(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	const retention, ttl = time.Second, 300 * time.Millisecond
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(100 * time.Millisecond),
		redlock.WithRetention(retention), redlock.WithRetryDelay(time.Millisecond, 20*time.Millisecond)}
	ctx, stop := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := map[string]int{}
	count := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		held[what]++
	}
	work := func(what string, take func() (func(context.Context) error, error)) {
		wg.Go(func() {
			for i := 0; i < 1000 && ctx.Err() == nil; i++ {
				release, err := take()
				if err != nil {
					continue
				}
				count(what)
				time.Sleep(5 * time.Millisecond)
				_ = release(context.Background())
				// A pause, so that readers find the writers' queue empty at
				// times (a queued writer keeps new readers out).
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	for w := range 4 {
		c := cl.newClient(t, opts...)
		rw := rwMutex(t, c, "rw")
		sem := semaphore(t, c, "sem", 2)
		work("reader", func() (func(context.Context) error, error) {
			h, err := rw.RLock(ctx)
			if err != nil {
				return nil, err
			}
			return h.Unlock, nil
		})
		if w == 0 {
			// One writer: queued writers keep new readers out (writer
			// preference), and four would always have one queued.
			work("writer", func() (func(context.Context) error, error) {
				h, err := rw.Lock(ctx)
				if err != nil {
					return nil, err
				}
				return h.Unlock, nil
			})
		}
		work("permit", func() (func(context.Context) error, error) {
			p, err := sem.AcquireN(ctx, 1+w%2)
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		})
		names := []string{"ma", "mb", "mc"}
		work("multi-lock", func() (func(context.Context) error, error) {
			m, err := c.LockMulti(ctx, []string{names[w%3], names[(w+1)%3]})
			if err != nil {
				return nil, err
			}
			return m.Unlock, nil
		})
		work("lock", func() (func(context.Context) error, error) {
			l, err := c.Lock(ctx, names[w%3])
			if err != nil {
				return nil, err
			}
			return l.Unlock, nil
		})
	}
	wg.Wait()
	t.Logf("holds: %v", held)
	for _, what := range []string{"reader", "writer", "permit", "multi-lock", "lock"} {
		if held[what] == 0 {
			t.Errorf("no %s was held: the workload did not run", what)
		}
	}
	time.Sleep(max(retention, 10*ttl) + 500*time.Millisecond)
	for i, n := range cl.inspect {
		k, err := n.DBSize(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if k > 10 {
			keys, _ := n.Keys(context.Background(), "*").Result()
			t.Errorf("node %d holds %d keys after R and the markers, e.g. %v", i, k, keys[:min(8, len(keys))])
		}
	}
}
