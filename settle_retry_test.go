package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// A client's own release that did not reach a node (its call failed, and
// is retried in the background) leaves the old value there; the client's
// next TryLock of the name, refused by that node and failed on another,
// said ErrLocked, "held by another owner", for a name nobody held
// (TestLoadOwnNames under load: "[2 granted, 1 refused, 2 timed out of
// 5]"). A refusal that may be the client's own old value is no evidence
// of another owner: the attempt is ErrUnavailable.
func TestOwnReleaseRetriedInTheBackgroundIsNotAnotherOwner(t *testing.T) {
	cl := startCluster(t, 3)
	var faulty atomic.Bool
	hook := func(script string) *faultHook {
		return &faultHook{before: func(s string) error {
			if faulty.Load() && s == script {
				return errLinkCut
			}
			return nil
		}}
	}
	c := cl.hookedOn(t, map[int]redis.Hook{1: hook("acquire"), 2: hook("release")})
	ctx := context.Background()
	l, err := c.TryLock(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at a majority: the third node's grant may still be
	// on its way, and must land before node 1's wire is cut.
	waitOnEvery(t, cl, "every node holds the lock", func(n redis.UniversalClient) bool {
		v, _ := n.Get(ctx, "redlock:{own}").Result()
		return v == l.ID()
	})
	faulty.Store(true) // node 2 loses the release, node 1 the next acquisition
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on a majority: %v", err)
	}
	_, err = c.TryLock(ctx, "own")
	if errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("TryLock of a name only this client's unfinished release holds: %v, want no ErrLocked", err)
	}
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("TryLock: %v, want ErrUnavailable", err)
	}
	// Another client's hold is still ErrLocked, own release or not.
	faulty.Store(false)
	other := cl.newClient(t)
	for deadline := 0; ; deadline++ { // the background retry lands, freeing node 2
		o, err := other.TryLock(ctx, "own")
		if err == nil {
			defer o.Unlock(ctx)
			break
		}
		if deadline > 200 {
			t.Fatalf("the other client never got the name: %v", err)
		}
	}
	// Once the retried release has landed, the refusals are the other's.
	waitOnEvery(t, cl, "the retried release landed", func(n redis.UniversalClient) bool {
		v, _ := n.Get(ctx, "redlock:{own}").Result()
		return v != l.ID()
	})
	if _, err := c.TryLock(ctx, "own"); !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("TryLock of a name another client holds: %v, want ErrLocked", err)
	}
}

// Review of issue 23, 2 (afterOwn): an attempt's call on a node waits for
// every own release or rollback of the name in flight there, and a
// rollback's "call" lasts until retryRelease ends: after a broken link,
// retries with pauses doubling from a node timeout up to TTL/4, for up to
// a TTL. So once a node's link was broken during a lost attempt, and has
// come back, this client's next attempts on that name do not reach the
// node until the rollback's next retry (seconds later); the round gives up
// on the node as silent (NodeTimedOut) and TryLock fails although the node
// is up, answering, and would grant. Before afterOwn the attempt was sent
// at once and granted.
//
// The forced order, on three real nodes: node 0's link is cut throughout
// (a node down); node 2's link is cut for one TryLock, which therefore
// loses, and stays cut until its rollback there has failed 6 times (the
// next retry is 3.2 s away); then node 2's link is back, and the same
// client's TryLock on the name needs nodes 1 and 2, both up.
// Origin: the adversarial review of issue 23 (availability under own releases).
func TestRollbackRetryHoldsBackARecoveredNode(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	var down atomic.Bool
	var rollbackFails atomic.Int32
	node2 := &faultHook{before: func(s string) error {
		if !down.Load() {
			return nil
		}
		if strings.HasPrefix(s, "release") && rollbackFails.Add(1) >= 8 {
			defer down.Store(false) // the link is back after this failure
		}
		return errLinkCut
	}}
	c := cl.actor(t, []*faultHook{cut(), nil, node2}, redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithTTL(40*time.Second))
	ctx := context.Background()
	// Pass the node list check with nodes 1 and 2.
	l, err := c.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	if _, err := c.TryLock(ctx, "review-avail"); err == nil {
		t.Fatal("TryLock won with nodes 0 and 2 cut")
	}
	for down.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	// Node 2 answers again; the rollback's next retry there is 3.2 s away.
	t0 := time.Now()
	l, err = c.TryLock(ctx, "review-avail")
	if l != nil {
		t.Logf("took %v: %+v", time.Since(t0), l.Nodes())
	}
	if err != nil {
		t.Fatalf("TryLock with nodes 1 and 2 up and nobody holding the name: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
