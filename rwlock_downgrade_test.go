package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The read-write lock's Downgrade: a failed or partial one, one after the
// validity, one over a key of another type, and a downgraded waiter.

// rwReaders is the readers' sorted set of the read-write lock name.
func rwReaders(name string) string { return "redlock:{" + name + "}:rw:readers" }

// warmDowngrade runs a Downgrade once on every node, so that the nodes have
// the script and a Downgrade sent to a paused node is applied as it resumes
// (an EVALSHA answered NOSCRIPT after the resume would apply nothing).
func warmDowngrade(t *testing.T, c *redlock.Client) {
	t.Helper()
	ctx := context.Background()
	w, err := rwMutex(t, c, "warm").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Downgrade that fails (the nodes that got it did not answer before its
// ctx ended, or its patience: 5 s) leaves the hold a write hold in the client's eyes
// (Reading false, Done open), while the Downgrade lands on the nodes as they
// resume: the writer's keys are now reader entries on a majority, and
// another client's reader is granted while the writer, valid and believing
// it writes, goes on writing.
// Origin: the adversarial review of the read-write lock.
func TestRWFailedDowngradeLandsLateAndLetsAReaderIntoAWriteHold(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(10*time.Second))
	other := cl.newClient(t)
	ctx := context.Background()
	warmDowngrade(t, c)
	warmDowngrade(t, other) // its node list checked before the pause
	const name = "failed-downgrade"
	w, err := rwMutex(t, c, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 1, 2)
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = w.Downgrade(dctx)
	cancel()
	if err == nil {
		t.Fatal("Downgrade with 2 of 3 nodes paused succeeded; the replay needs it to fail")
	}
	t.Logf("Downgrade: %v; Reading() = %v", err, w.Reading())
	resume()
	// The Downgrades buffered on the paused nodes land as they resume.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := 0
		for _, ic := range cl.inspect {
			if ic.ZCard(ctx, rwReaders(name)).Val() > 0 {
				n++
			}
		}
		if n >= 2 || time.Now().After(deadline) {
			t.Logf("reader entries on %d nodes", n)
			break
		}
	}
	r, err := rwMutex(t, other, name).TryRLock(ctx)
	if err == nil {
		defer r.Unlock(ctx)
		if !w.Reading() && time.Now().Before(w.Until()) && !isDone(w.Done()) {
			t.Errorf("a reader (token %d) was granted while the write hold (token %d, Reading()=false) is valid for %v more: "+
				"the failed Downgrade landed on the nodes", r.Token(), w.Token(), time.Until(w.Until()).Round(time.Millisecond))
		}
	} else if !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("the reader: %v", err)
	}
	_ = w.Unlock(ctx)
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A writer that waited in line and took the lock stays in the queue (and is
// promised the lock) until it unlocks; once it downgrades, its own queue
// entry and promise refuse new readers although no writer holds, waits or
// is promised anything it will take: for a promise's life and the waiter's
// staleness (2 node timeouts + the retry delay).
// Origin: the adversarial review of the read-write lock.
func TestRWDowngradedWaiterBlocksNewReaders(t *testing.T) {
	cl := startCluster(t, 3)
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithRetryDelay(time.Millisecond, 5*time.Millisecond)}
	c := cl.newClient(t, opts...)
	other := cl.newClient(t, opts...)
	ctx := context.Background()
	const name = "downgraded-waiter"
	m := rwMutex(t, c, name)
	r1, err := rwMutex(t, other, name).TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := writeInBackground(t, m, "the writer")
	time.Sleep(200 * time.Millisecond) // the writer is refused by r1, and queued
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		return
	}
	defer w.Unlock(ctx)
	if err := w.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var refused time.Duration
	for time.Since(start) < 3*time.Second {
		r, err := rwMutex(t, other, name).TryRLock(ctx)
		if err == nil {
			_ = r.Unlock(ctx)
			break
		}
		if !errors.Is(err, redlock.ErrLocked) {
			t.Fatal(err)
		}
		refused = time.Since(start)
		time.Sleep(20 * time.Millisecond)
	}
	if refused > 0 {
		t.Errorf("after the Downgrade of a writer that had waited in line, new readers were refused for %v "+
			"(no writer holds, waits or is promised the lock)", refused.Round(time.Millisecond))
	}
}

// Downgrade does not look at the hold's validity: after Done has closed
// (the write hold's validity ended, the client says so), a Downgrade that
// still finds the keys (they outlive the validity by the drift) returns
// nil, where Extend returns ErrExpired.
// Origin: the adversarial review of the read-write lock.
func TestRWDowngradeAfterValidityEnded(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(time.Second), redlock.WithDriftFactor(0.3))
	ctx := context.Background()
	w, err := rwMutex(t, c, "late-downgrade").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-w.Done()
	err = w.Downgrade(ctx)
	if err == nil {
		t.Errorf("Downgrade after Done closed: nil (Reading %v), want ErrExpired as Extend gives (%v)",
			w.Reading(), w.Extend(ctx))
	}
}

// rwAttempt is the outcome of a TryLock or TryRLock run in the background.
type rwAttempt struct {
	l   *redlock.RWLock
	err error
}

func rwTryAsync(ctx context.Context, m *redlock.RWMutex, reader bool) <-chan rwAttempt {
	done := make(chan rwAttempt, 1)
	go func() {
		var a rwAttempt
		if reader {
			a.l, a.err = m.TryRLock(ctx)
		} else {
			a.l, a.err = m.TryLock(ctx)
		}
		done <- a
	}()
	return done
}

// withoutRule is script s's source with rule removed (the replay's trap).
func withoutRule(t *testing.T, src, rule string) string {
	t.Helper()
	if !strings.Contains(src, rule) {
		t.Fatal("the script no longer has the rule the replay removes")
	}
	return strings.Replace(src, rule, "", 1)
}

// A key of another type where the readers' set goes (a key-name clash,
// set while a writer holds): Downgrade deletes the writer's key before its
// ZADD fails, so the write hold is gone from every node while the client
// still holds it for writing (Reading false, Done open); a second writer is
// granted.
// Origin: the adversarial review of the read-write lock.
func TestRWDowngradeOverAWrongTypeReadersKeyDropsTheWriteHold(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	other := cl.newClient(t)
	ctx := context.Background()
	const name = "wrongtype-down"
	w, err := rwMutex(t, c, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	for _, ic := range cl.inspect {
		if err := ic.Set(ctx, rwReaders(name), "clash", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	err = w.Downgrade(ctx)
	t.Logf("Downgrade: %v (ErrWrongType %v)", err, errors.Is(err, redlock.ErrWrongType))
	for _, ic := range cl.inspect {
		ic.Del(ctx, rwReaders(name)) // the clash goes away
	}
	w2, err := rwMutex(t, other, name).TryLock(ctx)
	if err == nil {
		defer w2.Unlock(ctx)
		if !w.Reading() && !isDone(w.Done()) {
			t.Errorf("a second writer (token %d) was granted while the first (token %d) holds for writing, valid for %v: "+
				"the failed Downgrade deleted its keys", w2.Token(), w.Token(), time.Until(w.Until()).Round(time.Millisecond))
		}
	}
}

// A Downgrade that reaches a majority only (cut on n2) leaves n2 a writer's
// key: Extend renews both kinds, Unlock removes both, and the lock is free.
// Origin: the adversarial review of the read-write lock.
func TestRWPartialDowngradeThenExtendAndUnlock(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.hookedOn(t, map[int]redis.Hook{2: cutScript("rw-downgrade")}, redlock.WithTTL(2*time.Second))
	other := cl.newClient(t)
	ctx := context.Background()
	const name = "partial-down"
	w, err := rwMutex(t, c, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Downgrade(ctx); err != nil {
		t.Fatalf("Downgrade on a majority: %v", err)
	}
	if n := cl.inspect[2].Exists(ctx, "redlock:{"+name+"}:rw").Val(); n != 1 {
		t.Fatalf("n2 should still hold the writer's key")
	}
	time.Sleep(time.Second)
	if err := w.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	// Extend returns at a majority: n2's extension may still be on its way.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		ms := cl.inspect[2].PTTL(ctx, "redlock:{"+name+"}:rw").Val()
		if ms >= 1200*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer's key on n2 was not extended: %v left", ms)
		}
	}
	if _, err := rwMutex(t, other, name).TryLock(ctx); !errors.Is(err, redlock.ErrLocked) {
		t.Errorf("a writer during the downgraded hold: %v, want ErrLocked", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w2, err := rwMutex(t, other, name).TryLock(ctx)
	if err != nil {
		t.Fatalf("a writer after the Unlock of a partly downgraded hold: %v", err)
	}
	_ = w2.Unlock(ctx)
}
