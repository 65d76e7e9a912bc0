package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// scriptHook runs before every library script a go-redis client sends. It
// gets the call's context, may block, and fails the call unsent with the
// error it returns.
type scriptHook func(ctx context.Context, script string) error

func (h scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h(ctx, redlock.ScriptName(cmd.Args())); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// hooked is a lock client whose wires to every node run h.
func (cl *cluster) hooked(t *testing.T, h scriptHook, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	clients := make([]redis.UniversalClient, len(cl.nodes))
	for i, n := range cl.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		rc.AddHook(h)
		clients[i] = rc
	}
	c, err := redlock.New(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		node.CloseClients(clients)
	})
	return c
}

// The keys are set after the acquisition starts, so they last at least
// until start + TTL (less the drift). Until used to be start + TTL - elapsed
// - drift, counting the acquisition's time twice: a slow acquisition got a
// lock that ended early (issue 11, item 4). The same for Extend.
func TestUntilCountsFromTheStartOnce(t *testing.T) {
	cl := startCluster(t, 3)
	const ttl, timeout = time.Second, 480 * time.Millisecond
	const slow = 400 * time.Millisecond // 40% of the TTL
	var slowed atomic.Bool
	hook := func(ctx context.Context, script string) error {
		if slowed.Load() && (script == "acquire" || script == "extend") {
			time.Sleep(slow)
		}
		return nil
	}
	c := cl.hooked(t, hook, redlock.WithTTL(ttl), redlock.WithNodeTimeout(timeout))
	validity := ttl - redlock.Drift(c)
	ctx := context.Background()
	// Load the scripts first: a NOSCRIPT reply makes a second, slowed call.
	warm, err := c.TryLock(ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	warm.Unlock(ctx)
	slowed.Store(true)

	before := time.Now()
	l, err := c.TryLock(ctx, "slow")
	returned := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	check := func(op string, before, returned time.Time) {
		until := l.Until()
		t.Logf("%s took %v; Until is %v after it returned", op, returned.Sub(before), until.Sub(returned))
		if !until.After(returned) {
			t.Errorf("%s returned a lock whose validity had already ended", op)
		}
		if until.Before(before.Add(validity)) || until.After(returned.Add(validity)) {
			t.Errorf("%s: Until is %v after the call began, want between %v and %v (TTL - drift from the start)",
				op, until.Sub(before), validity, returned.Sub(before)+validity)
		}
	}
	check("TryLock", before, returned)

	before = time.Now()
	if err := l.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	check("Extend", before, time.Now())
}
