package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Found by an adversarial review (fixed: every fenced extension renews H
// for the retention, never shortening it): Resume takes the hold's token from Inspect, i.e. from the
// name's H on the nodes holding the value. H expires one retention after
// its last commit, and nothing (Extend included) renews it while the hold
// lives, so a hold kept alive past the retention is resumed with token 0:
// Resume's handle does not "keep the committed token", and a fence that
// admitted the original token refuses every write of the resumed handle.
func TestResumeOfAHoldOlderThanTheRetentionKeepsItsToken(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(50 * time.Millisecond),
		redlock.WithRetention(2500 * time.Millisecond)}
	taker := cl.newClient(t, opts...)
	runner := cl.newClient(t, opts...)
	l, err := taker.TryLock(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if err := l.Extend(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r, err := runner.Resume(ctx, "long", l.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	if r.Token() != l.Token() {
		t.Fatalf("resumed a hold kept alive past the retention: token %d, want the hold's %d", r.Token(), l.Token())
	}
}
