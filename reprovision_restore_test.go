package redlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// review32Snapshot is a node's keys at one moment, as a backup (or a
// replica that has replicated up to then) holds them.
type review32Snapshot map[string]string

func review32Take(t *testing.T, cl *cluster, i int) review32Snapshot {
	t.Helper()
	ctx := context.Background()
	keys, err := cl.inspect[i].Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	s := review32Snapshot{}
	for _, k := range keys {
		v, err := cl.inspect[i].Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		s[k] = v
	}
	return s
}

// review32Restore restarts node i from snapshot s: its process restarts
// (a new replication id, as after any restart or a failover to a replica)
// and comes back with s's keys and nothing written since.
func review32Restore(t *testing.T, cl *cluster, i int, s review32Snapshot) {
	t.Helper()
	cl.restartEmpty(t, i)
	ctx := context.Background()
	for k, v := range s {
		if err := cl.inspect[i].RestoreReplace(ctx, k, 0, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReprovisionKeepsOutANodeRestoredBetweenReadAndReset: the reset
// (reset.lua) is conditional on the uuid, id and lost stamp read after the
// wait, but not on the replication id. A node that is restored from a
// snapshot (or fails over to a replica that lags) between Reprovision's
// read and its reset still holds the same uuid and id and no stamp (no
// fenced script touched it yet to stamp it), so the reset applies, records
// the new replication id, and the node counts at once: the delayed restart
// that would have kept it out (identity.lua stamps such a node; repair.lua
// refuses a stamp of another replication id for exactly this reason) is
// skipped, and the lock keys it lost are forgotten.
//
// Reprovision's doc says a lock held across it keeps its exclusion "whether
// its majority lost its data or not". Interleaving (N = 3):
//  1. n0's snapshot is taken (it has its identity, no lock keys).
//  2. A (n2 cut off for A, TTL 10 s) takes "x" on {n0, n1}.
//  3. An operator reprovisions above A's token; every node is intact, so
//     there is nothing to wait out; it reads the nodes.
//  4. Its reset to n0 is on the way when n0 restarts from the snapshot
//     (uuid and id back, A's key gone, a new replication id).
//  5. The reset lands: same uuid, same id, no stamp: applied. n0 is intact
//     under its new replication id.
//  6. B (n1 cut off for B) takes "x" on {n0, n2} while A has ~10 s left.
//
// Without Reprovision the restored n0 would be stamped at the first fenced
// call and kept out for the longest TTL (TestRestoredNodeAloneIsKeptOut).
func TestReprovisionKeepsOutANodeRestoredBetweenReadAndReset(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	snap := review32Take(t, cl, 0)
	for k := range snap {
		if strings.Contains(k, "{x}") {
			t.Fatalf("snapshot holds a lock key %q", k)
		}
	}
	const ttl = 10 * time.Second
	a := cl.actor(t, []*faultHook{nil, nil, cut()}, redlock.WithTTL(ttl), redlock.WithNodeTimeout(200*time.Millisecond))
	la, err := a.TryLock(ctx, "x")
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	var once sync.Once
	hold := &faultHook{before: func(s string) error {
		if s == "reset" {
			once.Do(func() { review32Restore(t, cl, 0, snap) })
		}
		return nil
	}}
	op := cl.actor(t, []*faultHook{hold, nil, nil}, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	rerr := op.Reprovision(ctx, la.Token())
	t.Logf("Reprovision: %v", rerr)
	if v, _ := cl.inspect[0].Get(ctx, "redlock:{x}").Result(); v != "" {
		t.Fatalf("n0 still holds A's key: the restore did not happen")
	}
	b := cl.actor(t, []*faultHook{nil, cut(), nil}, redlock.WithTTL(ttl), redlock.WithNodeTimeout(200*time.Millisecond))
	lb, err := b.TryLock(ctx, "x")
	if err != nil {
		t.Logf("B refused (the restored n0 was kept out): %v", err)
		return
	}
	defer lb.Unlock(ctx)
	if left := time.Until(la.Until()); left > 0 {
		t.Fatalf("B granted \"x\" (token %d) on {n0, n2} while A (token %d) has %v of validity left: n0, restored "+
			"from a snapshot between Reprovision's read and its reset, was readmitted with no delayed restart",
			lb.Token(), la.Token(), left.Round(time.Millisecond))
	}
}

// TestRestoredNodeAloneIsKeptOut is the control: the same restore
// of n0 without a Reprovision keeps n0 out (it is stamped and must be
// waited out), so B is refused.
func TestRestoredNodeAloneIsKeptOut(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	snap := review32Take(t, cl, 0)
	const ttl = 10 * time.Second
	a := cl.actor(t, []*faultHook{nil, nil, cut()}, redlock.WithTTL(ttl), redlock.WithNodeTimeout(200*time.Millisecond))
	la, err := a.TryLock(ctx, "x")
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	review32Restore(t, cl, 0, snap)
	b := cl.actor(t, []*faultHook{nil, cut(), nil}, redlock.WithTTL(ttl), redlock.WithNodeTimeout(200*time.Millisecond))
	for i := 0; i < 5; i++ {
		if lb, err := b.TryLock(ctx, "x"); err == nil {
			lb.Unlock(ctx)
			t.Fatalf("B granted while A has %v left, with no Reprovision", time.Until(la.Until()))
		} else if i == 4 {
			t.Logf("B refused as expected: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
