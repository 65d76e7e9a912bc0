package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// Issue 14: Lock with a wrong password retried silently until its context
// ended, and the error said only "too few nodes answered". A failure no
// retry can fix ends Lock at once, typed, naming the node's reply.
func TestLockEndsAtOnceOnWrongPassword(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	for i, in := range cl.inspect {
		if err := in.Do(ctx, "ACL", "SETUSER", "locker", "on", ">secret", "~*", "&*", "+@all").Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	login := func(i int, password string) redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr(), Username: "locker", Password: password})
	}
	wrong := []redis.UniversalClient{login(0, "wrong"), login(1, "wrong"), login(2, "wrong")}
	t.Cleanup(func() { node.CloseClients(wrong) })
	c, err := redlock.New(wrong)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Lock(lctx, "auth")
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrAuth) || lctx.Err() != nil {
		t.Fatalf("Lock with a wrong password: %v after %v, want ErrAuth before the 5s context ends", err, took)
	}
	t.Logf("after %v: %v", took, err)
	if !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("the message does not name the nodes' reply: %v", err)
	}
	for _, r := range quorumError(t, err).Nodes {
		if r.Outcome == redlock.NodeFailed && !strings.HasPrefix(r.Err.Error(), "WRONGPASS") {
			t.Errorf("node %d failed with %v, want its WRONGPASS reply", r.Node, r.Err)
		}
	}

	// One node with a wrong password among healthy ones does not keep a
	// majority from granting: Lock succeeds.
	mixed := []redis.UniversalClient{cl.clients[0], cl.clients[1], login(2, "wrong")}
	t.Cleanup(func() { node.CloseClients(mixed[2:]) })
	c2, err := redlock.New(mixed)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	l, err := c2.Lock(lctx, "auth-one")
	if err != nil {
		t.Fatalf("Lock with one node of three refusing the password: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// An ACL user that may not run a command the lock script calls (INCR, for
// the fencing counter): Redis refuses the call inside the script. Lock
// ends at once with ErrNoPermission.
func TestLockEndsAtOnceWithoutPermission(t *testing.T) {
	var acl []any
	for _, a := range lockerACL {
		if a != "+incr" {
			acl = append(acl, a)
		}
	}
	cl := startCluster(t, 3)
	ctx := context.Background()
	var nodes []redis.UniversalClient
	for i, in := range cl.inspect {
		if err := in.Do(ctx, append(acl, "allchannels")...).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr(), Username: "locker", Password: "secret"}))
	}
	t.Cleanup(func() { node.CloseClients(nodes) })
	c, err := redlock.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = c.Lock(lctx, "perm")
	if !errors.Is(err, redlock.ErrNoPermission) || lctx.Err() != nil {
		t.Fatalf("Lock as a user without +incr: %v, want ErrNoPermission before the 5s context ends", err)
	}
}

// killMajority starts three nodes, kills two, and returns a client of them.
func killMajority(t *testing.T, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	cl := startCluster(t, 3)
	for _, i := range []int{1, 2} {
		if err := cl.nodes[i].Kill(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return cl.newClient(t, opts...)
}

// Issue 14: a node that refuses connections was reported as "timed out"
// with ErrNodeTimeout: go-redis redials until the call's context ends and
// returns only the context's error. Its NodeResult now carries the refused
// dial, and the message says so.
func TestRefusedNodeReportsTheDialError(t *testing.T) {
	c := killMajority(t, redlock.WithNodeTimeout(100*time.Millisecond))
	_, err := c.TryLock(context.Background(), "refused")
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("TryLock with two of three nodes killed: %v, want ErrUnavailable", err)
	}
	for _, r := range quorumError(t, err).Nodes[1:] {
		if r.Outcome != redlock.NodeFailed || !errors.Is(r.Err, syscall.ECONNREFUSED) ||
			errors.Is(r.Err, redlock.ErrNodeTimeout) {
			t.Errorf("killed node %d: %v, %v; want failed with the refused connection", r.Node, r.Outcome, r.Err)
		}
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("the message does not name the cause: %v", err)
	}
}

// Issue 14: Lock with a majority down retried silently (57 attempts in 3 s,
// nothing logged even with WithLogger). It keeps retrying, but warns with
// the nodes' causes, at most once per lock name every 5 s.
func TestLockWarnsRateLimitedWhileAMajorityIsDown(t *testing.T) {
	var logs syncBuffer
	c := killMajority(t, redlock.WithNodeTimeout(20*time.Millisecond),
		redlock.WithRetryDelay(time.Millisecond, 5*time.Millisecond),
		redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 3 { // three Lock calls of one name share the limit
		wg.Go(func() {
			if _, err := c.Lock(ctx, "down"); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Lock with a majority down: %v, want the context's deadline", err)
			}
		})
	}
	wg.Wait()
	var warns []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "lock attempts failing") {
			warns = append(warns, line)
		}
	}
	// 3 s is within one 5 s window; allow one more for a slow machine.
	if len(warns) < 1 || len(warns) > 2 {
		t.Fatalf("%d warnings in 3 s, want 1 (at most one per 5 s):\n%s", len(warns), logs.String())
	}
	t.Log(warns[0])
	if !strings.Contains(warns[0], "connection refused") || !strings.Contains(warns[0], "lock=down") {
		t.Errorf("the warning does not name the lock and the nodes' cause: %s", warns[0])
	}
}

// Issue 14: a full node (maxmemory with noeviction) must be reported as
// full: the message names the OOM reply, and Lock keeps retrying (the node
// may be freed), rather than calling it amnesiac or merely unavailable.
func TestFullNodesAreReportedAsOOM(t *testing.T) {
	ctx := context.Background()
	g, err := node.StartProcesses(ctx, 3, node.Config{Args: []string{"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"}})
	if err != nil {
		t.Fatal(err)
	}
	nodes := g.NewClients()
	t.Cleanup(func() {
		node.CloseClients(nodes)
		g.Close()
	})
	c, err := redlock.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		full := false
		for k := 0; k < 10000 && !full; k++ {
			err := n.Set(ctx, fmt.Sprint("fill:", k), strings.Repeat("x", 10000), 0).Err()
			full = err != nil && strings.HasPrefix(err.Error(), "OOM")
		}
		if !full {
			t.Fatalf("node %d did not fill up", i)
		}
	}
	_, err = c.TryLock(ctx, "full")
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("TryLock on full nodes: %v, want ErrUnavailable", err)
	}
	t.Log(err)
	if msg := err.Error(); !strings.Contains(msg, "OOM command not allowed") || strings.Contains(msg, "amnesia") {
		t.Errorf("the message does not say the nodes are full: %v", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Lock(lctx, "full"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock on full nodes: %v, want retries until the context ends", err)
	}
}

// Issue 14: MinTTL said 10 ms, but New refused any TTL under about 105 ms
// with the default node timeout, without saying what would work. The
// error now gives the shortest TTL that works, and that TTL is accepted.
func TestTTLBoundIsStated(t *testing.T) {
	cl := startCluster(t, 3)
	for _, tc := range []struct {
		opts []redlock.Option
		min  time.Duration
	}{
		{nil, 104 * time.Millisecond}, // two rounds of 50 ms + 2 ms, over 0.99
		{[]redlock.Option{redlock.WithoutFencing()}, 53 * time.Millisecond},
		{[]redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithDriftFactor(0.1)}, 2225 * time.Millisecond},
	} {
		_, err := redlock.New(cl.clients, append(tc.opts, redlock.WithTTL(tc.min-time.Millisecond))...)
		if !errors.Is(err, redlock.ErrNoValidityBudget) || !strings.Contains(err.Error(), tc.min.String()) {
			t.Errorf("TTL %v: %v; want ErrNoValidityBudget naming %v", tc.min-time.Millisecond, err, tc.min)
		}
		c, err := redlock.New(cl.clients, append(tc.opts, redlock.WithTTL(tc.min))...)
		if err != nil {
			t.Errorf("TTL %v, the bound the error gave: %v", tc.min, err)
			continue
		}
		c.Close()
	}
	_, err := redlock.New(cl.clients, redlock.WithTTL(time.Millisecond))
	if !errors.Is(err, redlock.ErrTTLTooShort) || !strings.Contains(err.Error(), "104ms") {
		t.Errorf("TTL 1ms: %v; want ErrTTLTooShort naming the 104ms that works", err)
	}
}
