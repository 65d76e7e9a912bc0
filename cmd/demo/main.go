// Command demo starts five local redis-server nodes, has several goroutines
// fight over one lock while they update a shared counter, pauses nodes, and
// prints what happened.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func main() {
	workers := flag.Int("workers", 8, "goroutines contending for the lock")
	rounds := flag.Int("rounds", 50, "acquisitions per goroutine and phase")
	flag.Parse()
	// go-redis logs every failed dial to a paused node; the demo reports
	// those faults itself.
	redis.SetLogger(quietLogger{})
	if err := run(*workers, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(workers, rounds int) error {
	ctx := context.Background()
	fmt.Println("starting 5 redis-server nodes on loopback...")
	nodes, err := node.StartProcesses(ctx, 5, node.Config{})
	if err != nil {
		return err
	}
	defer nodes.Close()
	for _, n := range nodes {
		fmt.Printf("  %s  %s\n", n.Name(), n.Addr())
	}
	clients := nodes.NewClients()
	defer node.CloseClients(clients)
	c, err := redlock.New(clients,
		redlock.WithTTL(2*time.Second),
		redlock.WithNodeTimeout(200*time.Millisecond),
		redlock.WithRetryDelay(0, 5*time.Millisecond))
	if err != nil {
		return err
	}
	defer c.Close()

	fmt.Printf("\n%-32s %8s %8s %9s %9s %10s\n", "phase", "locks", "counter", "overlaps", "p50", "elapsed")
	if err := phase(ctx, c, "all 5 nodes up", workers, rounds); err != nil {
		return err
	}
	for _, i := range []int{3, 4} {
		if err := nodes[i].Pause(ctx); err != nil {
			return err
		}
	}
	if err := phase(ctx, c, "n3, n4 paused (SIGSTOP)", workers, rounds); err != nil {
		return err
	}
	if err := pausedHolder(ctx, clients); err != nil {
		return err
	}
	if err := nodes[2].Pause(ctx); err != nil {
		return err
	}
	start := time.Now()
	_, err = c.TryLock(ctx, "demo")
	fmt.Printf("\nwith n2, n3, n4 paused, TryLock fails after %v:\n  %v\n", time.Since(start).Round(time.Millisecond), err)
	fmt.Printf("  errors.Is(err, redlock.ErrUnavailable) = %v\n", errors.Is(err, redlock.ErrUnavailable))
	for _, i := range []int{2, 3, 4} {
		if err := nodes[i].Resume(ctx); err != nil {
			return err
		}
	}
	return nil
}

// pausedHolder shows fencing: A's lease runs out while A is stopped, B
// takes the lock, and A's late write is refused by the store.
func pausedHolder(ctx context.Context, clients []redis.UniversalClient) error {
	const ttl = 300 * time.Millisecond
	c, err := redlock.New(clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		return err
	}
	defer c.Close()
	store := &fence.Memory{}
	a, err := c.Lock(ctx, "invoice:7")
	if err != nil {
		return err
	}
	fmt.Printf("\nA holds invoice:7 with token %d, then stops for %v (GC, swap)...\n", a.Token(), 2*ttl)
	time.Sleep(2 * ttl)
	b, err := c.Lock(ctx, "invoice:7")
	if err != nil {
		return err
	}
	defer b.Unlock(ctx)
	fmt.Printf("B takes the lock with token %d; B writes: %v\n", b.Token(), errString(store.Admit(ctx, "invoice:7", b.Token(), "B")))
	fmt.Printf("A wakes up and writes with token %d: %v\n", a.Token(), errString(store.Admit(ctx, "invoice:7", a.Token(), "A")))
	fmt.Printf("A's Unlock: %v\n", errString(a.Unlock(ctx)))
	return nil
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// phase runs workers goroutines that each take the lock rounds times and
// increment a counter with a separate read and write, so any overlap of two
// holders would lose an update.
func phase(ctx context.Context, c *redlock.Client, name string, workers, rounds int) error {
	var (
		inside, overlaps atomic.Int32
		counter          atomic.Int64
		mu               sync.Mutex
		waits            []time.Duration
		firstErr         error
		wg               sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range rounds {
				t0 := time.Now()
				l, err := c.Lock(ctx, "demo")
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				waits = append(waits, time.Since(t0))
				mu.Unlock()
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				v := counter.Load()
				time.Sleep(100 * time.Microsecond)
				counter.Store(v + 1)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	fmt.Printf("%-32s %8d %8d %9d %9v %10v\n", name, len(waits), counter.Load(), overlaps.Load(),
		median(waits).Round(time.Microsecond), time.Since(start).Round(time.Millisecond))
	return nil
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
