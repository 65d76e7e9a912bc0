package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// A late copy of a read hold's acquisition leaves the entry an Extend has
// set since alone (issue 32, found by the adversarial review of b81518c).
// The unheard rule counts only a lease's extension calls, and rw_read.lua
// re-applied its TTL to an existing reader entry (ZADD now+TTL, without
// NX), so a late copy of the acquisition was a shortening of its own: B
// was granted the write lock with 6.88 s of A's read validity left. Now
// ZADD NX, as SET NX for the others. The mutex, multi-lock and
// semaphore acquisitions are SET NX and change nothing when they land
// late; the read hold's does.
//
// Interleaving (N = 3, TTL 3 s, ReadTimeout 300 ms, default MaxRetries, as
// extend_resent_test.go models a resend):
//  1. A's TryRLock: the first EVALSHA to n1 and n2 is held in the network;
//     go-redis re-sends after 300 ms and the copies are granted.
//  2. A's Extend(For(10s)) succeeds on all three: Until is ~9.9 s out,
//     nothing of the lease is unheard.
//  3. The held acquisition copies reach n1 and n2: A's reader entry there
//     now lives 3 s from then.
//  4. B's write lock is granted on {n1, n2} ~3 s later, with ~7 s of A's
//     read validity left.
func TestReadAcquisitionLandingLateLeavesALaterExtendAlone(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	clients, wires, hooks := delayedWires(t, cl, "rw-read")
	a, err := redlock.New(clients, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		for _, c := range clients {
			c.Close()
		}
	})
	b := cl.newClient(t, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))
	ctx := context.Background()
	rwA, err := a.RWMutex("rx")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		h.arm.Store(true)
	}
	l, err := rwA.TryRLock(ctx)
	if err != nil {
		t.Fatalf("A's read lock: %v", err)
	}
	review32Quiet(t, hooks)
	for i, w := range wires {
		select {
		case <-w.held:
		default:
			t.Fatalf("no first attempt was held on n%d", i)
		}
	}
	if err := l.Extend(ctx, redlock.For(10*time.Second)); err != nil {
		t.Fatalf("Extend(10s): %v", err)
	}
	review32Quiet(t, hooks)
	t.Logf("A's Until after the 10 s Extend: %v from now", time.Until(l.Until()).Round(time.Millisecond))
	for _, w := range wires {
		w.open()
	}
	for _, w := range wires {
		<-w.landed
	}
	time.Sleep(100 * time.Millisecond)
	rwB, err := b.RWMutex("rx")
	if err != nil {
		t.Fatal(err)
	}
	var granted time.Time
	deadline := time.Now().Add(6 * time.Second)
	for {
		wl, err := rwB.TryLock(ctx)
		if err == nil {
			granted = time.Now()
			defer wl.Unlock(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Logf("B never granted the write lock (the late copies did not cut A's reads): %v", err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := l.Until().Sub(granted); left > 0 {
		t.Fatalf("B was granted the write lock on \"rx\" while A's read hold still had %v of validity "+
			"(A's first-attempt read acquisition, re-sent by go-redis and heard, landed after the 10 s Extend)",
			left.Round(time.Millisecond))
	}
}

// A reader's round 1 to two paused nodes lands after its attempt failed and
// was rolled back: the release markers refuse it, no zombie reader entry is
// left, and a writer is granted at once.
// Origin: the adversarial review of the read-write lock.
func TestRWLateReadAfterRollbackLeavesNoEntry(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(5*time.Second))
	other := cl.newClient(t)
	ctx := context.Background()
	const name = "late-read"
	// Both clients' node lists are checked, and the nodes know the scripts.
	for _, cc := range []*redlock.Client{c, other} {
		r, err := rwMutex(t, cc, "warm").TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Unlock(ctx)
	}
	resume := cl.pause(t, 1, 2)
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := rwMutex(t, c, name).TryRLock(rctx)
	cancel()
	if err == nil {
		t.Fatal("a reader with 2 of 3 paused was granted")
	}
	time.Sleep(200 * time.Millisecond) // the rollbacks are sent meanwhile
	resume()
	time.Sleep(500 * time.Millisecond)
	for i, ic := range cl.inspect {
		if n := ic.ZCard(ctx, rwReaders(name)).Val(); n != 0 {
			t.Errorf("node %d keeps %d reader entries of a failed attempt", i, n)
		}
	}
	w, err := rwMutex(t, other, name).TryLock(ctx)
	if err != nil {
		t.Fatalf("a writer after the failed reader: %v", err)
	}
	_ = w.Unlock(ctx)
}
