package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// A node that went out while no client was locking (a master restarted
// with its data, here its recorded replication id changed by hand) was
// never stamped as out, since only fenced calls stamped it: Repair then
// said "wait one TTL" on every call, for ever, and `redlock repair --wait`
// could not finish. Now Repair stamps it, and the delay runs down.
func TestRepairOfANodeNobodyTouchedRunsDown(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	const ttl = time.Second
	a := cl.newClient(t, redlock.WithTTL(ttl))
	l, err := a.TryLock(ctx, "quiet") // records the TTL in use on the nodes
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.inspect[1].Set(ctx, "redlock:node-replid", "0000", 0).Err(); err != nil {
		t.Fatal(err)
	}

	admin := cl.newClient(t, redlock.WithTTL(ttl))
	var soon *redlock.RepairTooSoonError
	if err := admin.Repair(ctx, 1); !errors.As(err, &soon) {
		t.Fatalf("Repair right after the node went out: %v, want a RepairTooSoonError", err)
	}
	first := soon.Wait
	time.Sleep(first + 100*time.Millisecond)
	if err := admin.Repair(ctx, 1); err != nil {
		t.Fatalf("Repair %v after it said wait %v: %v", first+100*time.Millisecond, first, err)
	}
	if ids, err := admin.NodeIDs(ctx); err != nil || ids[1] < 0 {
		t.Fatalf("ids after repair %v, %v", ids, err)
	}
}
