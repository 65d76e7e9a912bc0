package redlock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Adversarial replays of the waiting marks ('~' in QUEUE, '~life' in
// SEEN: watch.lua) and of a refused multi-lock's pass-on
// (multi_wait.lua) on real nodes.

// countingMulti is a client whose multi-lock acquisitions on node 0 are
// counted, with retry delays far longer than the test: it moves only when
// woken.
func (cl *cluster) countingMulti(t *testing.T, n *atomic.Int32) *redlock.Client {
	hooks := map[int]redis.Hook{0: beforeScript{"multi-acquire", func() { n.Add(1) }}}
	return cl.hookedOn(t, hooks, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
}

// Two waiting multi-locks, M1 over {pa, pb} and M2 over {pa, pc}, queued
// on pa in that order, and a Lock waiter L behind them on pa; pb and pc
// stay held. pa's Unlock promises pa to M1, which cannot use it (pb
// held) and passes it on to M2 (the next live waiter), which cannot use
// it either (pc held) and passes it on to "the member's next live waiter
// (skipping itself)": passOn scans pa's queue from its head, so the next
// live waiter of M2 is M1, ahead of it, not L behind it. The promise
// goes back and forth between the two multi-locks, each pass renewing
// it (at least a promise period), each woken at once by the other's
// pass: pa stays free and promised, and L, who could take it, never
// gets it while pb and pc are held.
//
// Expected: L gets pa (M2 passes it to the waiter after itself, L).
//
// Found by review, fixed: it failed on 8cfed96 (L timed out with pa free,
// 1168 multi-lock attempts on node 0 in 4 s): passOn scanned the queue
// from its head and took the first live member other than WAITER, which
// could be a waiter ahead of it that had already passed. It now passes
// only to a waiter after WAITER (multi_wait.lua).
func TestReviewMarkPassOnPingPongStarvesTheLockWaiter(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	holder := cl.newClient(t, redlock.WithTTL(30*time.Second))
	a, err := holder.TryLock(ctx, "pa")
	if err != nil {
		t.Fatal(err)
	}
	b, err := holder.TryLock(ctx, "pb")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	c, err := holder.TryLock(ctx, "pc")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unlock(ctx)

	var calls atomic.Int32
	multi := func(cli *redlock.Client, names ...string) (<-chan error, context.CancelFunc) {
		mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		got := make(chan error, 1)
		go func() {
			m, err := cli.LockMulti(mctx, names)
			if err == nil {
				_ = m.Unlock(ctx)
			}
			got <- err
		}()
		return got, cancel
	}
	m1, cancel1 := multi(cl.countingMulti(t, &calls), "pa", "pb")
	defer cancel1()
	cl.inQueue(t, "pa", 1)
	cl.inQueue(t, "pb", 1)
	time.Sleep(20 * time.Millisecond)
	m2, cancel2 := multi(cl.countingMulti(t, &calls), "pa", "pc")
	defer cancel2()
	cl.inQueue(t, "pa", 2)
	cl.inQueue(t, "pc", 1)
	time.Sleep(20 * time.Millisecond)
	got := lockAndUnlock(cl.newClient(t), "pa", 4*time.Second)
	cl.inQueue(t, "pa", 3)

	before := calls.Load()
	start := time.Now()
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-got
	after := calls.Load() - before
	if err != nil {
		t.Errorf("the Lock waiter behind two multi-locks that cannot use pa: %v after %v; "+
			"%d multi-lock attempts on node 0 meanwhile (the promise going back and forth)",
			err, time.Since(start).Round(time.Millisecond), after)
	} else {
		t.Logf("the Lock waiter got pa after %v; %d multi-lock attempts on node 0", time.Since(start).Round(time.Millisecond), after)
	}
	cancel1()
	cancel2()
	<-m1
	<-m2
}

// A reader's mark outlives the wait: after the writer's Unlock woke the
// reader and it read and left, '~life' is still live in SEEN. It must
// block no reader (rw_read.lua skips it), never be promised the lock
// (release.lua reads QUEUE, where it never is), keep no key alive without
// an expiry, and a writer queued behind a reader must get the promise
// (not the mark).
func TestReviewMarkLifeBlocksNothingAndExpires(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	key := "redlock:{ml}:rw"
	queue, seen, next := key+":queue", key+":queue:seen", key+":next"
	w, err := rwMutex(t, cl.newClient(t), "ml").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hooks, calls := refusals("rw-read")
	rc := cl.hookedOn(t, hooks, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
	read := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		h, err := rwMutex(t, rc, "ml").RLock(rctx)
		if err == nil {
			err = h.Unlock(ctx)
		}
		read <- err
	}()
	waitCount(t, calls, 1)
	time.Sleep(100 * time.Millisecond)
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatalf("reader: %v", err)
	}
	marked := 0
	for _, in := range cl.inspect {
		if s, err := in.ZScore(ctx, seen, "~life").Result(); err == nil && s > float64(time.Now().UnixMilli()) {
			marked++
		}
	}
	if marked == 0 {
		t.Fatal("no node holds a live '~life': the replay does not test it")
	}
	// Readers are not held back by the mark alone.
	r2, err := rwMutex(t, cl.newClient(t), "ml").TryRLock(ctx)
	if err != nil {
		t.Fatalf("a reader with only '~life' in SEEN: %v", err)
	}
	// A writer refused by r2 queues; r2's Unlock promises it the lock.
	wc := cl.newClient(t)
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		h, err := rwMutex(t, wc, "ml").Lock(wctx)
		if err == nil {
			for _, in := range cl.inspect {
				if n, _ := in.Get(ctx, next).Result(); strings.HasPrefix(n, "~") {
					t.Errorf("NEXT is the mark %q", n)
				}
			}
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		k := 0
		for _, in := range cl.inspect {
			if n, _ := in.ZCount(ctx, queue, "-inf", "(+inf").Result(); n >= 1 {
				k++
			}
		}
		if k >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never queued")
		}
	}
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the writer queued behind a reader, with '~life' in SEEN: %v", err)
	}
	// Every key of the queue that remains expires.
	for i, in := range cl.inspect {
		for _, k := range []string{queue, seen, next} {
			if ttl, _ := in.PTTL(ctx, k).Result(); ttl == -1 {
				t.Errorf("node %d: %s has no expiry", i, k)
			}
		}
	}
}
