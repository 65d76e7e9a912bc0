package redlock_test

import (
	"context"
	"testing"

	"github.com/quorumlock/redlock"
)

// The read-write lock's reentry: an inner reentry's Downgrade, and a
// reentry through a cancelled context.

// A Reentrant reentry of a write hold (Do's fn context) may Downgrade: it
// downgrades the outermost hold, under the frame that acquired it and still
// writes. Another client's reader is then granted inside the outer write
// section. (Inner reentries' Unlocks only count down; their Downgrade
// changes the hold for every frame.)
// Origin: the adversarial review of the read-write lock.
func TestRWInnerReentryDowngradesTheOuterWriteHold(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	other := cl.newClient(t)
	ctx := context.Background()
	m := rwMutex(t, c, "inner-downgrade")
	err := m.Do(ctx, func(fctx context.Context, outer *redlock.RWLock) error {
		inner, err := m.Lock(fctx, redlock.Reentrant())
		if err != nil {
			return err
		}
		if err := inner.Downgrade(fctx); err != nil {
			t.Logf("inner Downgrade: %v", err)
		}
		_ = inner.Unlock(fctx)
		// Back in the outer frame, which took the write hold and writes.
		r, err := rwMutex(t, other, "inner-downgrade").TryRLock(ctx)
		if err == nil {
			t.Errorf("after an inner reentry's Downgrade and Unlock, another reader (token %d) is granted inside the "+
				"outer frame's write section (outer.Reading() = %v)", r.Token(), outer.Reading())
			_ = r.Unlock(ctx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Reentrant read through a context that is already cancelled: the RW lock
// hands out a new reentry, where Client.Lock's reentry reports ctx's error.
// Origin: the adversarial review of the read-write lock.
func TestRWReentryThroughACancelledContext(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	r, err := rwMutex(t, c, "cancelled").TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	l, err := c.TryLock(ctx, "cancelled-mutex")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	rctx, cancel := context.WithCancel(r.Context(ctx))
	cancel()
	lctx, cancel2 := context.WithCancel(l.Context(ctx))
	cancel2()
	_, rerr := rwMutex(t, c, "cancelled").RLock(rctx, redlock.Reentrant())
	_, lerr := c.Lock(lctx, "cancelled-mutex", redlock.Reentrant())
	if (rerr == nil) != (lerr == nil) {
		t.Errorf("a reentry through a cancelled context: RWMutex.RLock %v, Client.Lock %v", rerr, lerr)
	}
}
