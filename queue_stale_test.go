package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Clients that share a lock may retry at different paces: a batch job that
// sleeps seconds between attempts beside services on the defaults. A waiter
// counts as live for as long as its own client says (its retry delay plus
// slack), not the releaser's. The release used the releasing client's
// STALE, 301 ms on the defaults: waiters of 2-3 s retry delays, asleep
// for a promise, were dropped from every queue, and later arrivals took the
// lock before them ([1 2 3 0] in 5 of 5 runs, on Redis and Valkey).
func TestWaitersKeepTheirPlaceWhateverTheReleasersRetryDelay(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	opts := []redlock.Option{redlock.WithTTL(5 * time.Second), redlock.WithNodeTimeout(100 * time.Millisecond)}
	holder := cl.newClient(t, opts...) // default retry delay: STALE 301 ms
	h, err := holder.TryLock(ctx, "paces")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 4 {
		c := cl.newClient(t, append(opts, redlock.WithRetryDelay(2*time.Second, 3*time.Second))...)
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			l, err := c.Lock(lctx, "paces")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			l.Unlock(ctx)
		})
		time.Sleep(30 * time.Millisecond)
	}
	// Waiter 0's last attempt is now over 301 ms old.
	time.Sleep(300 * time.Millisecond)
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := fmt.Sprint(order); got != "[0 1 2 3]" {
		t.Errorf("acquisition order %s, want arrival order [0 1 2 3]", got)
	}
}

// A waiter on short retry delays joining a queue must not cut the life of
// the queue that waiters on long ones stand in: every join set the queue's
// expiry to four of the joiner's STALE, so one default client shortened a
// line of slow sleepers' to 1.2 s.
func TestShortStaleJoinerDoesNotShortenTheQueue(t *testing.T) {
	cl := startCluster(t, 1)
	n, ctx := cl.clients[0], context.Background()
	key := "redlock:{life}"
	if err := n.Set(ctx, key, "holder", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	join := func(w string, stale int) {
		t.Helper()
		keys := []string{key, key + ":released:v" + w, key + ":next", key + ":queue", key + ":queue:seen"}
		// EVAL, not go-redis's Script: its SHA-1 is refused in FIPS-only mode.
		if err := n.Eval(ctx, redlock.AcquireScript, keys, "v"+w, 60000, w, stale, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	join("slow/1", 3201)
	join("fast/1", 301)
	for _, k := range []string{key + ":queue", key + ":queue:seen"} {
		if ttl := n.PTTL(ctx, k).Val(); ttl < 12*time.Second {
			t.Errorf("%s expires in %v after a short-STALE join, want the slow waiter's 12.8 s kept", k, ttl)
		}
	}
	// Each waiter's liveness ends at its own STALE after its join.
	now, err := n.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for w, stale := range map[string]int64{"slow/1": 3201, "fast/1": 301} {
		live := int64(n.ZScore(ctx, key+":queue:seen", w).Val())
		if d := live - now.UnixMilli(); d > stale || d < stale-1000 {
			t.Errorf("%s counts as live for %d ms more, want about its own %d", w, d, stale)
		}
	}
}
