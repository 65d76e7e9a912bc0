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

// The family's waiters and their promises: given back before a
// subscription, a newcomer barging, a reader's mark cut short.

// A member promised to a waiting multi-lock before the multi-lock's client
// listens (its first attempt queued it in every member's queue; the
// member's Unlock promised the member to it while the attempt's replies
// were on their way back, before it subscribed). The multi-lock then looks
// once (WakeListening), is refused (another member held), and does not
// give the promise back: internal/waiting/retry.go gives back only after a wake-up that was
// a promise (promised = reason == WakePromised). The member's next Lock
// waiter, queued behind the multi-lock, is woken by nothing: the promise
// lapses silently and it sleeps out its retry delay.
//
// Found by review, fixed (a refused multi-lock's nodes now pass on a
// promise it cannot use, whenever it came: lua/multi_wait.lua). Was:
// internal/waiting/retry.go gave back only after a wake-up that was a promise, so a
// promise that came before the subscription was never given back.
// Origin: the adversarial review of the family's waiting (watch.lua, multi_wait.lua, internal/waiting/retry.go).
func TestMultiPromiseBeforeSubscribeNotGivenBack(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	a, err := cl.newClient(t).TryLock(ctx, "ea")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cl.newClient(t).TryLock(ctx, "eb")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)

	// The multi-lock's first attempt returns only once the gate opens, on
	// every node: its client cannot subscribe before.
	gate := make(chan struct{})
	var ran atomic.Int32
	var once [3]sync.Once
	hooks := map[int]redis.Hook{}
	for i := range 3 {
		hooks[i] = afterScript{"multi-acquire", func() {
			once[i].Do(func() {
				ran.Add(1)
				<-gate
			})
		}}
	}
	mc := cl.hookedOn(t, hooks, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
	mctx, mcancel := context.WithTimeout(ctx, 20*time.Second)
	defer mcancel()
	multi := make(chan error, 1)
	go func() {
		m, err := mc.LockMulti(mctx, []string{"ea", "eb"})
		if err == nil {
			_ = m.Unlock(ctx)
		}
		multi <- err
	}()
	waitCount(t, &ran, 3) // queued on every node, replies held
	cl.inQueue(t, "ea", 1)

	// The member's next waiter, queued behind the multi-lock.
	lc := cl.newClient(t, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
	got := lockAndUnlock(lc, "ea", 8*time.Second)
	cl.inQueue(t, "ea", 2)

	if err := a.Unlock(ctx); err != nil { // promised to the multi-lock, first in line
		t.Fatal(err)
	}
	close(gate) // the multi-lock's client subscribes now, after the promise
	start := time.Now()
	if err := <-got; err != nil {
		t.Errorf("the member's Lock waiter behind the multi-lock: %v after %v; want it served once the multi-lock "+
			"found eb held (the promise made before its client listened is never given back)",
			err, time.Since(start).Round(time.Millisecond))
	}
	mcancel()
	if err := <-multi; err == nil {
		t.Error("the multi-lock got its set while eb was held")
	}
}

// While a multi-lock waits on a member whose other member is held, every
// release of the member is promised to the multi-lock, which gives it
// back to nobody (yield.lua publishes a release to nobody): the member's
// queued Lock waiters lose their arrival order, and a newcomer's TryLock
// takes the member ahead of them. Without the multi-lock in the queue the
// release promises the member to the first Lock waiter and TryLock is
// refused (Lock's doc: "contended locks pass in arrival order").
//
// Found by review, fixed: the give-back (yield.lua) deleted NEXT and
// published to nobody; the refused multi-lock's nodes now promise the
// member to its next live waiter, with the rest of the promise, as
// release.lua would (lua/multi_wait.lua).
// Origin: the adversarial review of the family's waiting (watch.lua, multi_wait.lua, internal/waiting/retry.go).
func TestMultiGiveBackLetsANewcomerBarge(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	for _, withMulti := range []bool{false, true} {
		name := "fa"
		other := "fb"
		if withMulti {
			name, other = "ga", "gb"
		}
		// The holder's promises last 2 node timeouts: 2 s here, longer than
		// the first waiter's slow attempt.
		a, err := cl.newClient(t, redlock.WithNodeTimeout(time.Second)).TryLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cl.newClient(t).TryLock(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithCancel(ctx)
		multi := make(chan error, 1)
		if withMulti {
			mc := cl.newClient(t, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
			go func() {
				_, err := mc.LockMulti(mctx, []string{name, other})
				multi <- err
			}()
			cl.inQueue(t, name, 1)
			time.Sleep(300 * time.Millisecond) // its client listens
		} else {
			multi <- nil
		}
		// The first Lock waiter: its attempts after the first are slow to
		// reach the nodes (a loaded client), so that the release's winner is
		// decided by the queue, not by a race.
		var slow atomic.Bool
		hooks := map[int]redis.Hook{}
		for i := range 3 {
			hooks[i] = beforeScript{"acquire", func() {
				if slow.Load() {
					time.Sleep(time.Second)
				}
			}}
		}
		lc := cl.hookedOn(t, hooks, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
		want := int64(1)
		if withMulti {
			want = 2
		}
		got := lockAndUnlock(lc, name, 10*time.Second)
		cl.inQueue(t, name, want)
		slow.Store(true)
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		newcomer := cl.newClient(t)
		barged := false
		for deadline := time.Now().Add(700 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if l, err := newcomer.TryLock(ctx, name); err == nil {
				barged = true
				_ = l.Unlock(ctx)
				break
			}
		}
		if err := <-got; err != nil {
			t.Errorf("multi %v: the queued Lock waiter: %v", withMulti, err)
		}
		mcancel()
		<-multi
		_ = b.Unlock(ctx)
		if barged {
			t.Errorf("multi %v: a newcomer's TryLock took %q ahead of its queued Lock waiter", withMulti, name)
		}
	}
}

// A reader's mark ('~' in the writers' queue) lives as long as the queue
// key; another waiter's join sets the queue's TTL from its own liveness
// (queue.lua enqueueOn: PEXPIRE 4 x its STALE), shorter than the mark's
// life for a reader that sleeps long. Once the key has expired, the
// holder's release finds no queue and publishes nothing: the reader is
// not woken.
//
// Found by review, fixed: the mark's lifetime is kept in SEEN as '~life'
// (watch.lua), so a joiner's lifetime for the queue key is at least the
// mark's. It failed on a1e24cc: the reader was not woken, release.lua
// returning before it publishes when neither QUEUE nor NEXT exists.
// Origin: the adversarial review of the family's waiting (watch.lua, multi_wait.lua, internal/waiting/retry.go).
func TestReaderMarkCutShortByAWritersJoin(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	w1, err := rwMutex(t, cl.newClient(t), "mk").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hooks, calls := refusals("rw-read")
	rc := cl.hookedOn(t, hooks, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
	read := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 12*time.Second)
		defer cancel()
		h, err := rwMutex(t, rc, "mk").RLock(rctx)
		if err == nil {
			_ = h.Unlock(ctx)
		}
		read <- err
	}()
	waitCount(t, calls, 1)
	time.Sleep(200 * time.Millisecond)
	// A writer with the default (short) delays joins the queue: the queue's
	// TTL is now 4 x ~200 ms.
	wm := rwMutex(t, cl.newClient(t), "mk")
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, werr := wm.Lock(wctx)
	wcancel()
	if werr == nil {
		t.Fatal("the second writer got the lock while the first held it")
	}
	time.Sleep(1500 * time.Millisecond) // the queue key, and the reader's mark, expire
	start := time.Now()
	if err := w1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatalf("the reader after the writer's unlock: %v after %v, want it woken", err, time.Since(start).Round(time.Millisecond))
	}
}
