package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Unlock returns at the majority, so a node may still hold the old value
// when the same client tries the name again. That attempt waits for its own
// release first. The replay: three nodes; node 1's release is held back
// 2 ms, and the next attempt's call on node 2 is 30 ms late, past the grace
// an attempt gives the last node once another refused. Without the wait,
// node 1 refuses, node 2 is given up on, and TryLock fails with ErrLocked
// on a lock that nobody holds.
func TestNextAttemptWaitsForItsOwnRelease(t *testing.T) {
	cl := startCluster(t, 3)
	var armed atomic.Bool
	c := cl.newClient(t, redlock.WithoutFencing(), redlock.WithNodeTimeout(50*time.Millisecond),
		redlock.WithTrace(lateReleaseTrace(&armed)))
	ctx := context.Background()
	for i := range 10 {
		l, err := c.TryLock(ctx, "settle")
		if err != nil {
			t.Fatalf("cycle %d: first TryLock: %v", i, err)
		}
		armed.Store(true)
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("cycle %d: Unlock: %v", i, err)
		}
		l, err = c.TryLock(ctx, "settle")
		armed.Store(false)
		if err != nil {
			t.Fatalf("cycle %d: TryLock right after this client's Unlock: %v", i, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("cycle %d: second Unlock: %v", i, err)
		}
	}
}

// lateReleaseTrace holds back, while armed, node 1's release by 2 ms and
// node 2's acquisition by 30 ms: past the grace an attempt gives the last
// node once another refused, at a 50 ms node timeout.
func lateReleaseTrace(armed *atomic.Bool) *redlock.Trace {
	return &redlock.Trace{NodeCall: func(op string, node int) {
		if !armed.Load() {
			return
		}
		switch {
		case op == "unlock" && node == 1:
			time.Sleep(2 * time.Millisecond)
		case op == "lock" && node == 2:
			time.Sleep(30 * time.Millisecond)
		}
	}}
}
