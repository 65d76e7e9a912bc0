package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The edges of the phase-fair rule that an adversarial review of issue 34
// found: a reader phase's last reader that gives up instead of coming in,
// a reader's Unlock where its own entry has expired, and a key of the
// application's at one of the rule's keys.

// The last reader admitted by a hold's end that gives up before coming in
// hands the lock to the queued writer, as its Unlock would have: without
// that, the writer, refused while the reader still waited, slept its whole
// retry delay (here 15 s) with the lock free. The hold ends by expiry, so
// nobody is woken, and both sleep.
func TestRWLastAdmittedReaderToGiveUpHandsTheLockToTheQueuedWriter(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithRetryDelay(15*time.Second, 15*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "phase-leave"
	m := rwMutex(t, c, name)
	if _, err := m.TryLock(ctx, redlock.For(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	reader := rwInBackground(rctx, m, true)
	waitOnEvery(t, cl, "the reader waits", func(n redis.UniversalClient) bool { return rwWaitingReaders(t, n, name) == 1 })
	writer := rwInBackground(ctx, m, false)
	waitOnEvery(t, cl, "the writer queues", func(n redis.UniversalClient) bool { return rwQueuedWriters(t, n, name) >= 1 })
	time.Sleep(500 * time.Millisecond) // the write hold expires: the reader is admitted, and sleeps on
	rcancel()
	if r := <-reader; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the reader whose ctx ended: %v", r.err)
	}
	select {
	case w := <-writer:
		if w.err != nil {
			t.Fatalf("the queued writer: %v", w.err)
		}
		_ = w.l.Unlock(ctx)
	case <-time.After(7 * time.Second):
		t.Fatal("the queued writer still waits 7 s after the last admitted reader gave up, the lock free")
	}
}

// A reader's Unlock that finds its own entry expired promises the lock to
// no writer while the phase goes on: it used to take the writer's path,
// which promised the lock to the queued writer while another reader held
// it and a reader admitted by the same hold's end had still to come in,
// and that reader, refused by the promise, waited a writer phase more.
func TestRWReaderUnlockAfterItsEntryExpiredPromisesNoWriterMidPhase(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithNodeTimeout(150*time.Millisecond), redlock.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "phase-expired-reader"
	key := "redlock:{" + name + "}:rw"
	m := rwMutex(t, c, name)
	w1, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short := make(chan rwResult, 1)
	go func() {
		l, err := m.RLock(ctx, redlock.For(500*time.Millisecond))
		short <- rwResult{l, err, time.Now()}
	}()
	long := rwInBackground(ctx, m, true)
	select {
	case a := <-short:
		t.Fatalf("the short reader did not wait: %v", a.err)
	default:
	}
	waitOnEvery(t, cl, "two readers wait", func(n redis.UniversalClient) bool { return rwWaitingReaders(t, n, name) == 2 })
	// A third reader refused under the same hold, that will be slow to
	// come back: live for 10 s, needing that hold to end.
	for i, n := range cl.inspect {
		if err := n.ZAdd(ctx, key+":rwait", redis.Z{Member: "slow/1", Score: 0}).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		n.ZAdd(ctx, key+":rwait:seen", redis.Z{Member: "slow/1", Score: float64(time.Now().Add(10 * time.Second).UnixMilli())})
	}
	writer := rwInBackground(ctx, m, false)
	waitOnEvery(t, cl, "a writer queues", func(n redis.UniversalClient) bool { return rwQueuedWriters(t, n, name) >= 1 })
	if err := w1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := <-short, <-long
	if a.err != nil || b.err != nil {
		t.Fatalf("the readers that waited through the write: %v, %v", a.err, b.err)
	}
	time.Sleep(700 * time.Millisecond) // the short reader's entry expires everywhere
	_ = a.l.Unlock(ctx)                // its error is not the point: what it leaves is
	for i, n := range cl.inspect {
		if p, err := n.Get(ctx, key+":next").Result(); !errors.Is(err, redis.Nil) {
			t.Errorf("node %d: the lock is promised to %q (%v) while a reader holds it and an admitted one still waits", i, p, err)
		}
	}
	select {
	case w := <-writer:
		t.Fatalf("the writer got in during the reader phase: %v", w.err)
	default:
	}
	if err := b.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.inspect { // the slow reader gives up
		n.ZRem(ctx, key+":rwait", "slow/1")
		n.ZRem(ctx, key+":rwait:seen", "slow/1")
	}
	if w := <-writer; w.err != nil {
		t.Fatalf("the writer after the phase: %v", w.err)
	} else {
		_ = w.l.Unlock(ctx)
	}
}

// A key of the application's at one of the rule's keys: a read or write
// that meets it fails with ErrWrongType naming it, and Unlock still
// releases the write hold (it used to fail on the clash, leaving the hold
// to its TTL).
func TestRWPhaseKeyOfAnotherTypeIsNamedAndStrandsNoHold(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "phase-clash"
	key := "redlock:{" + name + "}:rw"
	m := rwMutex(t, c, name)
	w, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.inspect {
		if err := n.Set(ctx, key+":rwait", "the application's", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var wt *redlock.WrongTypeError
	if _, err := m.TryRLock(ctx); !errors.As(err, &wt) || wt.Key != key+":rwait" {
		t.Fatalf("a read refused beside the clash: %v, want a WrongTypeError naming %s", err, key+":rwait")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("Unlock beside the clash: %v", err)
	}
	// Unlock returns at a majority: the last node's release may still run.
	waitOnEvery(t, cl, "the writer's key is gone after Unlock", func(n redis.UniversalClient) bool {
		k, err := n.Exists(ctx, key).Result()
		return err == nil && k == 0
	})
	_, err = m.TryLock(ctx)
	if !errors.As(err, &wt) {
		t.Fatalf("a write beside the clash: %v, want a WrongTypeError", err)
	}
	if !errors.Is(err, redlock.ErrWrongType) {
		t.Fatalf("%v is not ErrWrongType", err)
	}
}
