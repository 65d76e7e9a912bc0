package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Do's keep-alive keeps a lock whose shortening failed (issue 32, found by
// the adversarial review of b81518c, liveness). Before the fix: inside Do (TTL 3 s, keep-alive every 1 s), fn's
// Extend(For(1s)) fails with its call to n1 unheard (n2 cut off for A).
// Until is pulled back to ~1 s out, and every later keep-alive Extend is
// cut to the unheard 1 s call, but the TTL (and so the keep-alive's 1 s
// interval) stays 3 s: Done closes before each next extension and fn loses
// a lock its client could keep by extending sooner (fn was cancelled 938
// ms after the failed Extend). Now the keep-alive extends within half the
// validity left when that is sooner than TTL/3.
func TestDoKeepsALockWhoseShorteningFailed(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	hold := newHoldFirst("extend")
	t.Cleanup(hold.open)
	a := cl.hookedOn(t, map[int]redis.Hook{1: hold, 2: cut()},
		redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()
	var lostAfter time.Duration
	var cause error
	err := a.Do(ctx, "do-short", func(fctx context.Context, l *redlock.Lock) error {
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		err := l.Extend(short, redlock.For(time.Second))
		cancel()
		if err == nil {
			t.Error("the shortening succeeded: its call to n1 was meant to be held")
		}
		began := time.Now()
		t.Logf("after the failed shortening: Until %v from now", time.Until(l.Until()).Round(time.Millisecond))
		select {
		case <-fctx.Done():
			lostAfter, cause = time.Since(began), context.Cause(fctx)
			for i, c := range cl.inspect {
				t.Logf("n%d PTTL when fn was cancelled: %v", i, c.PTTL(ctx, "redlock:{do-short}").Val())
			}
		case <-time.After(4 * time.Second):
		}
		return nil
	})
	t.Logf("Do: %v", err)
	if cause != nil && errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("fn was cancelled %v after a failed Extend(For(1s)) (cause %v), though the keep-alive could keep the lock by extending within ~0.97 s",
			lostAfter.Round(time.Millisecond), cause)
	}
}

// Break 3: Do keeps extending at the TTL it had when its timer was armed.
// fn shortens the lock (Extend(For(3s)) of a 30s lock): the keep-alive's
// next extension is still 10s away, the lock's validity ends after 3s,
// and Do cancels fn with ErrLockLost though every node is up.
// Origin: an adversarial review of the API's edges.
func TestDoKeepsAShortenedLock(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	err := c.Do(context.Background(), "shortened", func(fctx context.Context, l *redlock.Lock) error {
		if err := l.Extend(fctx, redlock.For(3*time.Second)); err != nil {
			return err
		}
		select {
		case <-fctx.Done():
			return fmt.Errorf("fn's context ended after fn shortened the lock, all nodes up: %w", context.Cause(fctx))
		case <-time.After(8 * time.Second):
			return nil
		}
	})
	if err != nil {
		t.Error(err)
	}
}
