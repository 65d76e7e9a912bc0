package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// Close returns in bounded time while a node is paused, even when the
// go-redis clients wait for ever on a read (ReadTimeout -1): it no longer
// waits for a call stuck on that node, nor for a subscription stuck dialling
// it. Close waited until the node resumed.
func TestCloseIsBoundedWithANodePausedAndNoReadTimeout(t *testing.T) {
	cl := startCluster(t, 3)
	var clients []redis.UniversalClient
	for _, nd := range cl.nodes {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: nd.Addr(), ReadTimeout: -1}))
	}
	t.Cleanup(func() { node.CloseClients(clients) })
	holder := cl.newClient(t)
	ctx := context.Background()
	if _, err := holder.TryLock(ctx, "close"); err != nil {
		t.Fatal(err)
	}
	c, err := redlock.New(clients, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	warm, err := c.TryLock(ctx, "warm") // connections dialled
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(ctx)

	resume := cl.pause(t, 2)
	// The waiter's first attempt sits unanswered on node 2, and its
	// subscription there is stuck dialling; nodes 0 and 1 take it.
	got := lockAndUnlock(c, "close", time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for {
		subs := 0
		for _, in := range cl.inspect[:2] {
			subs += int(in.PubSubNumSub(ctx, "redlock:{close}:released").Val()["redlock:{close}:released"])
		}
		if subs == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not subscribe on nodes 0 and 1 (%d)", subs)
		}
		time.Sleep(20 * time.Millisecond)
	}

	closed := make(chan struct{})
	start := time.Now()
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Logf("Close returned after %v", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Errorf("Close still blocked 2 s after it was called, with a node paused")
	}
	if err := <-got; err == nil {
		t.Error("the waiter got the lock from a closed client")
	}

	// What Close abandoned ends once the node answers.
	resume()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still blocked 10 s after the node resumed")
	}
	if !redlock.WaitAbandoned(c, 10*time.Second) {
		t.Error("the client's goroutines were still running 10 s after the node resumed")
	}
}

// Lock on a client already closed returns ErrClosed at once and sends
// nothing. It took the first attempt's ErrClosed for an attempt that had
// reached the nodes, and sent a leave to every node for a waiter that never
// joined, waiting up to a node timeout for it.
func TestLockOnAClosedClientSendsNothing(t *testing.T) {
	cl := startCluster(t, 3)
	var sent atomic.Int32
	c := cl.hooked(t, scriptHook(func(context.Context, string) error {
		sent.Add(1)
		return nil
	}), redlock.WithNodeTimeout(time.Second))
	c.Close()
	start := time.Now()
	_, err := c.Lock(context.Background(), "closed")
	if !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("Lock on a closed client: %v, want ErrClosed", err)
	}
	if took, n := time.Since(start), sent.Load(); n != 0 || took > 500*time.Millisecond {
		t.Errorf("Lock on a closed client sent %d commands and took %v", n, took)
	}
}

// Close while LockMulti waits on a held member: ErrClosed, promptly.
// Origin: the adversarial review of the multi-lock.
func TestCloseWhileLockMultiWaits(t *testing.T) {
	cl := startCluster(t, 3)
	cl.holdAsStranger(t, "cw-b", 0, 1, 2)
	c, err := redlock.New(cl.clients, redlock.WithRetryDelay(2*time.Second, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.LockMulti(context.Background(), []string{"cw-a", "cw-b"})
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	c.Close()
	select {
	case err := <-got:
		if !errors.Is(err, redlock.ErrClosed) {
			t.Errorf("LockMulti after Close: %v, want ErrClosed", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("LockMulti returned %v after Close", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LockMulti still waiting 5 s after Close")
	}
}

// Close while RLock and Lock wait: both return ErrClosed at once, and leave
// no goroutine behind (goleak in TestMain).
// Origin: the adversarial review of the read-write lock.
func TestRWCloseWhileWaiting(t *testing.T) {
	cl := startCluster(t, 3)
	holder := cl.newClient(t)
	c := cl.newClient(t)
	ctx := context.Background()
	w, err := rwMutex(t, holder, "close").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	m := rwMutex(t, c, "close")
	errs := make(chan error, 2)
	go func() { _, err := m.RLock(ctx); errs <- err }()
	go func() { _, err := m.Lock(ctx); errs <- err }()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	c.Close()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, redlock.ErrClosed) {
				t.Errorf("a waiting call at Close: %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiting call did not return after Close")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the waiting calls returned %v after Close", d)
	}
}

// A waiting multi-lock whose client closes leaves every member's queue,
// and a multi-lock that got its set leaves them at Unlock; nothing of it
// (promise, place) is left for the members' Lock waiters.
// Origin: the adversarial review of the family's waiting (watch.lua, multi_wait.lua, internal/waiting/retry.go).
func TestMultiLeavesQueuesOnCloseAndUnlock(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	a, err := cl.newClient(t).TryLock(ctx, "ha")
	if err != nil {
		t.Fatal(err)
	}
	mc := cl.newClient(t, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
	multi := make(chan error, 1)
	go func() {
		_, err := mc.LockMulti(ctx, []string{"ha", "hb"})
		multi <- err
	}()
	cl.inQueue(t, "ha", 1)
	cl.inQueue(t, "hb", 1)
	mc.Close()
	if err := <-multi; err == nil {
		t.Fatal("LockMulti got its set after Close")
	}
	cl.queueEmpties(t, "ha")
	cl.queueEmpties(t, "hb")

	// Got its set after waiting: Unlock takes it out of every queue.
	mc2 := cl.newClient(t)
	got := make(chan *redlock.MultiLock, 1)
	go func() {
		m, err := mc2.LockMulti(ctx, []string{"ha", "hb"})
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	cl.inQueue(t, "ha", 1)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if m == nil {
		return
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	cl.queueEmpties(t, "ha")
	cl.queueEmpties(t, "hb")
	// A Lock of a member is served at once (no promise left to the multi-lock).
	l, err := cl.newClient(t).TryLock(ctx, "hb")
	if err != nil {
		t.Fatalf("TryLock of a member after the multi-lock's Unlock: %v", err)
	}
	_ = l.Unlock(ctx)
}
