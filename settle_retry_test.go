package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

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
