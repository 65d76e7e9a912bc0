package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// review32EvalCalls is how many EVAL/EVALSHA node i has run.
func review32EvalCalls(t *testing.T, cl *cluster, i int) int {
	t.Helper()
	info, err := cl.inspect[i].Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_eval:") || strings.HasPrefix(line, "cmdstat_evalsha:") {
			rest := strings.TrimPrefix(line[strings.Index(line, ":")+1:], "calls=")
			c, _ := strconv.Atoi(rest[:strings.Index(rest, ",")])
			n += c
		}
	}
	return n
}

// TestUnsentShorteningDoesNotCapLaterExtends (liveness, not safety):
// an extension call is recorded as unheard before go-redis has even taken
// a connection (unheard.go's sent), and only a reply clears it. A call
// that never left the process (ctx already cancelled: go-redis fails it
// at the pool, and the batch link drops a queued call whose ctx ends) is
// therefore "unheard" for ever, and caps every later Extend on that node.
//
// Interleaving (N = 3, TTL 3 s): A holds "x"; A calls Extend(ctx, For(300ms))
// with a ctx already cancelled (a request that was aborted): no node runs
// anything (checked by INFO commandstats), yet all three nodes now carry an
// unheard 300 ms call. Every later Extend(For(3s)) succeeds on all nodes,
// which keep the key 3 s, but Until is at most ~300 ms out, for the life of
// the lease: Do's keep-alive (every TTL/3 = 1 s) can no longer keep it, and
// "Extends that repeat one TTL, as Do's keep-alive does, are never cut"
// (docs/fencing.md) does not hold.
func TestUnsentShorteningDoesNotCapLaterExtends(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
	l, err := c.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at a majority: wait for its call on the third node,
	// or that script would count as a cancelled Extend's.
	for i := range 3 {
		for deadline := time.Now().Add(10 * time.Second); cl.inspect[i].Exists(ctx, "redlock:{x}").Val() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("n%d never got TryLock's call", i)
			}
		}
	}
	before := make([]int, 3)
	for i := range before {
		before[i] = review32EvalCalls(t, cl, i)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for range 20 { // Extend's turn may see the cancelled ctx first: retry until a round ran
		_ = l.Extend(cancelled, redlock.For(300*time.Millisecond))
	}
	for i := range before {
		if n := review32EvalCalls(t, cl, i); n != before[i] {
			t.Fatalf("n%d ran %d scripts for the cancelled Extends: they were sent after all", i, n-before[i])
		}
	}
	for k := range 3 {
		if err := l.Extend(ctx, redlock.For(3*time.Second)); err != nil {
			t.Fatalf("Extend(For(3s)) #%d: %v", k, err)
		}
		left := time.Until(l.Until())
		var pttl []time.Duration
		for i := range 3 {
			pttl = append(pttl, cl.inspect[i].PTTL(ctx, "redlock:{x}").Val())
		}
		t.Logf("after Extend(For(3s)) #%d: Until %v out; the nodes keep the key %v", k, left.Round(time.Millisecond), pttl)
		if left < time.Second {
			t.Errorf("Extend(For(3s)) #%d succeeded on every node (PTTLs %v) but Until is only %v out: "+
				"the cancelled 300 ms Extend, which never reached any node, caps the lease for good",
				k, pttl, left.Round(time.Millisecond))
		}
		time.Sleep(150 * time.Millisecond)
	}
	_ = l.Unlock(ctx)
}
