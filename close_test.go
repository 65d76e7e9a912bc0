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
