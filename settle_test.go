package redlock_test

import (
	"context"
	"strings"
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

// A client's own release still in flight is never another owner, however
// late it is (issue 23, 2): under load a node's release was still on its
// way when the wait for it ran out, the node refused this client's next
// attempt with the old value, the others were given up on, and TryLock
// said ErrLocked, "held by another owner", on a name nobody else used.
// The forced order, on three nodes: node 1's release is held back 300 ms
// on the wire (six node timeouts, far past that wait), and node 2's next
// acquisition 30 ms, past the grace an attempt gives the last node once
// another refused.
func TestOwnReleaseInFlightIsNeverAnotherOwner(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			cl := startCluster(t, 3)
			var armed atomic.Bool
			delay := func(script string, d time.Duration) *faultHook {
				return &faultHook{before: func(s string) error {
					if armed.Load() && strings.HasPrefix(s, script) {
						time.Sleep(d)
					}
					return nil
				}}
			}
			opts := []redlock.Option{redlock.WithNodeTimeout(50 * time.Millisecond)}
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
			}
			c := cl.actor(t, []*faultHook{nil, delay("release", 300*time.Millisecond), delay("acquire", 30*time.Millisecond)}, opts...)
			ctx := context.Background()
			for i := range 5 {
				l, err := c.TryLock(ctx, "own-release")
				if err != nil {
					t.Fatalf("cycle %d: first TryLock: %v", i, err)
				}
				armed.Store(true)
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("cycle %d: Unlock: %v", i, err)
				}
				l, err = c.TryLock(ctx, "own-release")
				armed.Store(false)
				if err != nil {
					t.Fatalf("cycle %d: TryLock right after this client's Unlock, its release to node 1 still in flight: %v", i, err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("cycle %d: second Unlock: %v", i, err)
				}
			}
		})
	}
}
