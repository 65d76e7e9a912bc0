package redlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Readers and multi-locks are not in a queue, but they hear releases: a
// refused reader, or multi-lock, whose retry delay is longer than the test
// gets its hold when what it waited for is released to nobody. Two readers
// of one client both wake (a client's queued waiters wake one at a time,
// its watchers all).

// refusals counts the calls of the script called name on node 0.
func refusals(name string) (map[int]redis.Hook, *atomic.Int32) {
	var n atomic.Int32
	return map[int]redis.Hook{0: beforeScript{name, func() { n.Add(1) }}}, &n
}

func waitCount(t *testing.T, n *atomic.Int32, want int32) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); n.Load() < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls, want %d", n.Load(), want)
		}
	}
}

var fencedAndNot = []struct {
	name string
	opts []redlock.Option
}{{"fenced", nil}, {"unfenced", []redlock.Option{redlock.WithoutFencing()}}}

func TestReadersAreWokenByTheWritersUnlock(t *testing.T) {
	cl := startCluster(t, 3)
	for _, tc := range fencedAndNot {
		t.Run(tc.name, func(t *testing.T) { readersWoken(t, cl, tc.name, tc.opts) })
	}
}

func readersWoken(t *testing.T, cl *cluster, name string, opts []redlock.Option) {
	ctx := context.Background()
	w, err := rwMutex(t, cl.newClient(t, opts...), name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hooks, calls := refusals("rw-read")
	readers := cl.hookedOn(t, hooks, append([]redlock.Option{redlock.WithRetryDelay(30*time.Second, 30*time.Second)}, opts...)...)
	m := rwMutex(t, readers, name)
	got := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			r, err := m.RLock(rctx)
			if err == nil {
				defer r.Unlock(ctx)
				got <- nil
				time.Sleep(100 * time.Millisecond) // both hold at once
				return
			}
			got <- err
		})
	}
	waitCount(t, calls, 2) // both refused once
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-got; err != nil {
			t.Fatalf("a reader after the writer's unlock: %v", err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("readers got their holds %v after the unlock: not woken by it", d)
	}
	wg.Wait()
}

func TestMultiLockIsWokenByAMembersUnlock(t *testing.T) {
	cl := startCluster(t, 3)
	for _, tc := range fencedAndNot {
		t.Run(tc.name, func(t *testing.T) { multiWoken(t, cl, tc.name, tc.opts) })
	}
}

func multiWoken(t *testing.T, cl *cluster, name string, opts []redlock.Option) {
	ctx := context.Background()
	b, err := cl.newClient(t, opts...).TryLock(ctx, name+"b")
	if err != nil {
		t.Fatal(err)
	}
	hooks, calls := refusals("multi-acquire")
	c := cl.hookedOn(t, hooks, append([]redlock.Option{redlock.WithRetryDelay(30*time.Second, 30*time.Second)}, opts...)...)
	got := make(chan error, 1)
	go func() {
		mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		m, err := c.LockMulti(mctx, []string{name + "a", name + "b"})
		if err == nil {
			_ = m.Unlock(ctx)
		}
		got <- err
	}()
	waitCount(t, calls, 1)
	time.Sleep(200 * time.Millisecond)
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the multi-lock after its member's unlock: %v, want it woken", err)
	}
}

// A waiting multi-lock is one waiter in each member's queue: promised a
// member it cannot use (another member held), it gives it back at once, so
// that the member's next waiter, whose retry delay is longer than the
// test, is served by the notification rather than after the promise
// lapsed and its delay ran out. A multi-lock that gives up leaves every
// member's queue.
func TestMultiLockGivesBackAPromiseItCannotUse(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	a, err := cl.newClient(t).TryLock(ctx, "pa")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cl.newClient(t).TryLock(ctx, "pb")
	if err != nil {
		t.Fatal(err)
	}
	hooks, calls := refusals("multi-acquire")
	mc := cl.hookedOn(t, hooks, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
	mctx, mcancel := context.WithCancel(ctx)
	multi := make(chan error, 1)
	go func() {
		_, err := mc.LockMulti(mctx, []string{"pa", "pb"})
		multi <- err
	}()
	waitCount(t, calls, 1)
	cl.inQueue(t, "pa", 1)
	mutexWaiter := cl.newClient(t, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := mutexWaiter.Lock(wctx, "pa")
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	cl.inQueue(t, "pa", 2)
	if err := a.Unlock(ctx); err != nil { // promised to the multi-lock, the first in line
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the member's next waiter: %v, want the promise the multi-lock could not use given back to it", err)
	}
	mcancel()
	if err := <-multi; err == nil {
		t.Fatal("the multi-lock got its set with pb held")
	}
	_ = b.Unlock(ctx)
	for _, name := range []string{"pa", "pb"} {
		cl.queueEmpties(t, name)
	}
}

// inQueue waits until a majority of the nodes hold n waiters in the queue
// of the lock name.
func (cl *cluster) inQueue(t *testing.T, name string, n int64) {
	t.Helper()
	key := "redlock:{" + name + "}:queue"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		k := 0
		for _, in := range cl.inspect {
			// The mark of a waiting reader or multi-lock ('~') is no waiter.
			if got, _ := in.ZCount(context.Background(), key, "-inf", "(+inf").Result(); got >= n {
				k++
			}
		}
		if k >= len(cl.inspect)/2+1 {
			return
		}
	}
	t.Fatalf("%d waiters never joined the queue of %q on a majority", n, name)
}

// queueEmpties waits until no node holds a waiter in the queue of name.
func (cl *cluster) queueEmpties(t *testing.T, name string) {
	t.Helper()
	key := "redlock:{" + name + "}:queue"
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := int64(0)
		for _, in := range cl.inspect {
			n, _ := in.ZCount(context.Background(), key, "-inf", "(+inf").Result()
			left += n
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters left in the queue of %q", left, name)
		}
	}
}
