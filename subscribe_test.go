package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// holdNames sets the keys of the names on the given nodes with a foreign
// value, so that waiters for them are refused.
func (cl *cluster) holdNames(t *testing.T, names []string, idx ...int) {
	t.Helper()
	ctx := context.Background()
	for _, i := range idx {
		p := cl.inspect[i].Pipeline()
		for _, name := range names {
			p.Set(ctx, "redlock:{"+name+"}", "stranger", 10*time.Minute)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// releaseChannels counts, per node, the names whose release channel has a
// subscriber there.
func (cl *cluster) releaseChannels(t *testing.T, names []string) []int {
	t.Helper()
	channels := make([]string, len(names))
	for i, name := range names {
		channels[i] = "redlock:{" + name + "}:released"
	}
	counts := make([]int, len(cl.inspect))
	for i, in := range cl.inspect {
		subs, err := in.PubSubNumSub(context.Background(), channels...).Result()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		for _, n := range subs {
			if n > 0 {
				counts[i]++
			}
		}
	}
	return counts
}

// channelsOf counts, per node, the channels of locks named prefix* that
// anyone subscribes to.
func (cl *cluster) channelsOf(t *testing.T, prefix string) []int {
	t.Helper()
	counts := make([]int, len(cl.inspect))
	for i, in := range cl.inspect {
		chs, err := in.PubSubChannels(context.Background(), "redlock:{"+prefix+"*").Result()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		counts[i] = len(chs)
	}
	return counts
}

// waitersOn starts a Lock on c for each name, each under a context from
// ctx, at most batch at a time in their first attempt (refused is fed one
// value per failed attempt; a second without one lets the next waiter start
// anyway), and returns a function that waits for every Lock to return and
// reports the errors that do not match want.
func waitersOn(t *testing.T, ctx func() (context.Context, context.CancelFunc), c *redlock.Client, names []string,
	batch int, refused <-chan struct{}) (wait func(want error)) {
	errs := make(chan error, len(names))
	for i, name := range names {
		if i >= batch {
			select {
			case <-refused: // an earlier attempt failed
			case <-time.After(time.Second):
			}
		}
		go func() {
			ctx, cancel := ctx()
			defer cancel()
			l, err := c.Lock(ctx, name)
			if err == nil {
				l.Unlock(context.Background())
			}
			errs <- err
		}()
	}
	return func(want error) {
		t.Helper()
		deadline := time.After(time.Minute)
		for range names {
			select {
			case err := <-errs:
				if !errors.Is(err, want) {
					t.Errorf("waiter: %v, want %v", err, want)
				}
			case <-deadline:
				t.Fatal("waiters still waiting a minute after they were told to stop")
			}
		}
	}
}

// A burst of waiters on distinct names is subscribed on every node, however
// slowly the node takes the subscriptions. With a bounded request queue per
// node, the requests beyond the first 256 were dropped while a node's
// subscriber was busy: in a burst of 2000 waiters two nodes got 258
// subscriptions.
func TestBurstOfWaitersIsSubscribedOnEveryNode(t *testing.T) {
	const waiters = 2000
	cl := startCluster(t, 3)
	names := make([]string, waiters)
	for i := range names {
		names[i] = fmt.Sprintf("burst:%d", i)
	}
	cl.holdNames(t, names, 0, 1, 2)
	refused := make(chan struct{}, waiters*4)
	var attempts atomic.Int64
	// The subscriber is slow: it takes nothing until every waiter has asked.
	gate := make(chan struct{})
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	defer open()
	c := cl.newClient(t, redlock.WithTrace(&redlock.Trace{Subscribe: func(int) { <-gate }}), redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second), redlock.WithoutFencing(),
		redlock.WithRetryDelay(time.Minute, time.Minute), // no retries: each waiter waits for a notification
		redlock.WithObserver(redlock.ObserverFunc(func(_ context.Context, e redlock.Event) {
			if e.Op == "lock" && e.Err != nil {
				attempts.Add(1)
				refused <- struct{}{}
			}
		})))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := waitersOn(t, func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) },
		c, names, 100, refused)
	deadline := time.Now().Add(time.Minute)
	for attempts.Load() < waiters && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the last waiters have asked for their subscriptions
	open()

	deadline = time.Now().Add(20 * time.Second)
	var counts []int
	for {
		counts = cl.releaseChannels(t, names)
		if counts[0] == waiters && counts[1] == waiters && counts[2] == waiters {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("subscribed release channels per node: %v, want %d on each", counts, waiters)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wait(context.Canceled)
}

// Waiters that come and go while a node is paused leave nothing subscribed
// there once they are gone and their subscriptions' linger has passed. The
// paused node's subscriber was stuck dialling it, the rest of its request
// queue filled up, and the unsubscriptions were dropped: 257 names (514
// channels) stayed subscribed for good, go-redis resubscribing them on every
// reconnect; the request of a waiter right after the resume was dropped too.
func TestWaitersDuringAPauseLeaveNoSubscriptions(t *testing.T) {
	const waiters = 400
	cl := startCluster(t, 3)
	names := make([]string, waiters)
	for i := range names {
		names[i] = fmt.Sprintf("pause:%d", i)
	}
	cl.holdNames(t, append(names, "pause:sync"), 0, 1, 2)
	refused := make(chan struct{}, waiters*4)
	// A read timeout longer than the pause: a call to the paused node
	// waits for the resume, however long the waiters take.
	var clients []redis.UniversalClient
	for _, nd := range cl.nodes {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: nd.Addr(), ReadTimeout: time.Minute}))
	}
	t.Cleanup(func() { node.CloseClients(clients) })
	c, err := redlock.New(clients, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(100*time.Millisecond),
		redlock.WithoutFencing(), redlock.WithRetryDelay(time.Minute, time.Minute),
		redlock.WithObserver(redlock.ObserverFunc(func(_ context.Context, e redlock.Event) {
			if e.Op == "lock" && e.Err != nil { // refused, or too few answers in time: either way it waits
				refused <- struct{}{}
			}
		})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	resume := cl.pause(t, 2) // before the client's first subscription: it dials a paused node

	// Each waiter is refused, subscribes, and gives up after a second.
	waitersOn(t, func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Second)
	}, c, names, 100, refused)(context.DeadlineExceeded)
	time.Sleep(2500 * time.Millisecond) // past the linger: the client wants nothing subscribed
	resume()

	// Right after the resume the node has nothing subscribed yet, whatever
	// the client will send it. A waiter that comes now is subscribed there
	// after everything the client asked for before: once the node confirms
	// it, look.
	syncCtx, stopSync := context.WithCancel(context.Background())
	defer stopSync()
	synced := waitersOn(t, func() (context.Context, context.CancelFunc) { return context.WithCancel(syncCtx) },
		c, []string{"pause:sync"}, 1, nil)
	deadline := time.Now().Add(20 * time.Second)
	for cl.inspect[2].PubSubNumSub(context.Background(), "redlock:{pause:sync}:released").Val()["redlock:{pause:sync}:released"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a waiter after the resume was not subscribed on the resumed node within 20 s; "+
				"channels subscribed per node: %v", cl.channelsOf(t, "pause:"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopSync()
	synced(context.Canceled)

	deadline = time.Now().Add(20 * time.Second)
	for {
		counts := cl.channelsOf(t, "pause:")
		if counts[0]+counts[1]+counts[2] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("channels still subscribed per node, 20 s after the resume: %v", counts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
