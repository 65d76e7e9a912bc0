package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Reentrant Do: siblings share one watchdog, Do returns with the lock
// held by an outer frame, an unlocked reentry's handle.

// Two reentrant Dos through one Lock's context, side by side: the first
// starts the watchdog, the second sees it and starts none. When the first
// returns, its watchdog stops: nobody extends the lock any more, and the
// second Do's function runs on with a context that is never cancelled,
// past the validity, while another client takes the lock.
// Origin: the adversarial review of the semaphore and reentrancy.
func TestReentrySiblingDoRunsWithoutWatchdog(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	ttl := 600 * time.Millisecond
	c := cl.newClient(t, redlock.WithTTL(ttl))
	other := cl.newClient(t)
	ctx := context.Background()
	root, err := c.Lock(ctx, "sib")
	if err != nil {
		t.Fatal(err)
	}
	lctx := root.Context(ctx)
	aRunning, aEnd := make(chan struct{}), make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- c.Do(lctx, "sib", func(context.Context, *redlock.Lock) error {
			close(aRunning)
			<-aEnd
			return nil
		}, redlock.Reentrant())
	}()
	<-aRunning
	type report struct {
		cancelled bool
		stolen    bool
	}
	bDone := make(chan report, 1)
	go func() {
		var r report
		_ = c.Do(lctx, "sib", func(fctx context.Context, l *redlock.Lock) error {
			close(aEnd) // the first Do ends now
			deadline := time.After(4 * ttl)
			for {
				select {
				case <-fctx.Done():
					r.cancelled = true
					return nil
				case <-deadline:
					return nil
				case <-time.After(50 * time.Millisecond):
				}
				if ol, err := other.TryLock(ctx, "sib"); err == nil {
					r.stolen = true
					_ = ol.Unlock(ctx)
				}
			}
		}, redlock.Reentrant())
		bDone <- r
	}()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	r := <-bDone
	_ = root.Unlock(ctx)
	if r.stolen {
		t.Errorf("another client took the lock while a reentrant Do's function ran (its context cancelled: %v)", r.cancelled)
	}
	if r.cancelled {
		t.Errorf("the second Do's context was cancelled although it keeps the shared watchdog running (%v TTL, ran %v)", ttl, 4*ttl)
	}
}

// Do promises to release the lock when fn returns. With a reentry inside
// fn that is never unlocked (or unlocked later elsewhere), Do's Unlock
// only counts down and returns nil: Do returns, its watchdog is stopped,
// and the lock stays held until its TTL runs out. The design note says
// the outermost Unlock releases.
// Origin: the adversarial review of the semaphore and reentrancy.
func TestReentryDoReturnsWithTheLockStillHeld(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(3*time.Second))
	other := cl.newClient(t)
	ctx := context.Background()
	err := c.Do(ctx, "leak", func(ctx context.Context, _ *redlock.Lock) error {
		_, err := c.TryLock(ctx, "leak", redlock.Reentrant()) // a helper that forgets its Unlock
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := other.TryLock(ctx, "leak"); err != nil {
		t.Errorf("after Do returned nil, another client: %v (held by %q)", err, cl.holders(t, "leak"))
	} else {
		_ = l.Unlock(ctx)
	}
}

// A handle whose Unlock counted down still acts on the lock: its Extend
// succeeds (and with For moves the other holds' Until), and its Done stays
// open. Lock.Extend after Unlock is ErrReleased for every other lock.
// Origin: the adversarial review of the semaphore and reentrancy.
func TestReentryUnlockedHandleStillExtends(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(time.Minute))
	ctx := context.Background()
	outer, err := c.Lock(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock(ctx)
	inner, err := c.Lock(outer.Context(ctx), "h", redlock.Reentrant())
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	before := outer.Until()
	if err := inner.Extend(ctx, redlock.For(time.Second)); !errors.Is(err, redlock.ErrReleased) {
		t.Errorf("Extend of an unlocked inner handle: %v, want ErrReleased; the outer's Until moved %v -> %v",
			err, before.Format("15:04:05.000"), outer.Until().Format("15:04:05.000"))
	}
}
