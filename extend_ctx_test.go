package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// An extension already lost when ctx ends still says why it was lost
// (ErrUnavailable), beside ctx's error: the layout review found the merged
// round returning no Kind in this order of replies.
func TestExtendLostBeforeItsContextEndsSaysWhy(t *testing.T) {
	cl := startCluster(t, 3)
	// Node 1's link fails every extension at once.
	c := cl.actor(t, []*faultHook{nil, cutScript("extend"), nil},
		redlock.WithTTL(time.Minute), redlock.WithNodeTimeout(3*time.Second))
	bg := context.Background()
	l, err := c.TryLock(bg, "lost-then-cancelled")
	if err != nil {
		t.Fatal(err)
	}
	cl.holdAsStranger(t, "lost-then-cancelled", 0) // node 0 refuses
	resume := cl.pause(t, 2)                       // node 2 stays silent: lost, not yet refused by a majority
	ctx, cancel := context.WithTimeout(bg, 700*time.Millisecond)
	err = l.Extend(ctx)
	cancel()
	resume()
	if !errors.Is(err, redlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Extend: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
}
