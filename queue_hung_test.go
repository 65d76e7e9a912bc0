package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// ADV3-6b: docs/design.md says a node that first sees a waiter late (it was
// hung during its first attempts) still puts it about where it started
// waiting. A hung node runs the first attempts buffered in its sockets when
// it resumes, each carrying WAITED as it was when sent (0): every waiter
// that started during the pause gets about the resume time, whatever its
// start; ties are broken by waiter id (random uuid).
func TestAHungNodeKeepsTheWaitersOrder(t *testing.T) {
	cl := startCluster(t, 3)
	opts := []redlock.Option{redlock.WithTTL(10 * time.Second), redlock.WithNodeTimeout(100 * time.Millisecond)}
	holder := cl.newClient(t, opts...)
	ctx := context.Background()
	h, err := holder.TryLock(ctx, "hung")
	if err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 1, 2)
	var order []string
	var got []<-chan error
	for i := range 4 {
		c := cl.newClient(t, opts...)
		got = append(got, lockAndUnlock(c, "hung", 20*time.Second))
		// learn the waiter's id from node 0's queue
		time.Sleep(400 * time.Millisecond)
		ids := cl.inspect[0].ZRange(ctx, "redlock:{hung}:queue", 0, -1).Val()
		for _, id := range ids {
			if !contains(order, id) {
				order = append(order, id)
			}
		}
		if len(order) != i+1 {
			t.Fatalf("queue on node 0: %v", ids)
		}
	}
	resume()
	time.Sleep(500 * time.Millisecond)
	for n := range 3 {
		zs := cl.inspect[n].ZRangeWithScores(ctx, "redlock:{hung}:queue", 0, -1).Val()
		var line []any
		for _, z := range zs {
			line = append(line, indexOf(order, z.Member.(string)), int64(z.Score))
		}
		t.Logf("node %d queue (start index, score): %v", n, line)
	}
	for n := 1; n < 3; n++ {
		zs := cl.inspect[n].ZRange(ctx, "redlock:{hung}:queue", 0, -1).Val()
		if len(zs) == 0 || zs[0] != order[0] {
			t.Errorf("node %d puts %d waiters ahead differently: first is start #%d, want #0", n, len(zs), indexOf(order, first(zs)))
		}
	}
	h.Unlock(ctx)
	for i, g := range got {
		if err := <-g; err != nil {
			t.Errorf("waiter %d: %v", i, err)
		}
	}
}

func contains(s []string, x string) bool { return indexOf(s, x) >= 0 }
func indexOf(s []string, x string) int {
	for i, y := range s {
		if y == x {
			return i
		}
	}
	return -1
}
func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
