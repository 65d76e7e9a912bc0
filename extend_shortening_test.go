package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// An Extend that shortens the lease: what a failed one leaves.

// Break 5: a shortening Extend that fails still shortens the nodes it
// reached late. Before For an extension could only lengthen a key, so a
// failed one left the old Until safe whatever the nodes did with it. Forced
// order: two of three nodes are stopped (SIGSTOP) while Extend(For(2s)) of
// a 30s lock is sent; it times out there and fails, and Until stays ~30s
// away. The stopped nodes, resumed, run the PEXPIRE 2000 still in their
// socket buffers: with the node that answered, every key expires after 2s,
// another client takes the lock, and two hold it while the first's Done
// is open.
// Origin: an adversarial review of the API's edges.
func TestFailedShorteningExtendKeepsTheOldUntil(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(300*time.Millisecond))
	other := cl.newClient(t, redlock.WithTTL(30*time.Second))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "late-short")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	resume := cl.pause(t, 1, 2)
	err = l.Extend(ctx, redlock.For(2*time.Second))
	resume()
	if err == nil {
		t.Fatal("Extend succeeded with two of three nodes stopped")
	}
	t.Logf("Extend(For(2s)) with two nodes stopped: %v; Until in %v", err, time.Until(l.Until()).Round(time.Second))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-l.Done():
			return // the holder's own clock ended it: consistent
		default:
		}
		if o, err := other.TryLock(ctx, "late-short"); err == nil {
			_ = o.Unlock(ctx)
			t.Fatalf("another client took the lock while its holder's Done is open and Until is %v away",
				time.Until(l.Until()).Round(time.Second))
		}
	}
}
