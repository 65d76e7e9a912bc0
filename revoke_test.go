package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
)

// Revoke frees a lock whose holder keeps it (issue 35: Redisson's
// forceUnlock, Curator's revocation, with the token order intact): the
// holder can no longer extend it, the next holder's token is above the
// revoked one's, and a fence then refuses the revoked holder's writes.
func TestRevokeFreesAHeldLockAndKeepsTheTokenOrder(t *testing.T) {
	cl := startCluster(t, 5)
	ctx := context.Background()
	holder := cl.newClient(t, redlock.WithTTL(time.Minute))
	operator := cl.newClient(t)
	next := cl.newClient(t)
	l, err := holder.TryLock(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	f := &fence.Memory{}
	if err := f.Admit(ctx, "stuck", l.Token(), l.ID()); err != nil {
		t.Fatal(err)
	}
	rv, err := operator.Revoke(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if rv.Holder != l.ID() {
		t.Fatalf("revoked %q, want the holder's ID %q (per node: %q)", rv.Holder, l.ID(), rv.Revoked)
	}
	if err := l.Extend(ctx); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("the revoked holder's Extend: %v, want ErrExpired", err)
	}
	n, err := next.TryLock(ctx, "stuck")
	if err != nil {
		t.Fatalf("TryLock after the revocation: %v", err)
	}
	defer n.Unlock(ctx)
	if n.Token() <= l.Token() {
		t.Fatalf("the next holder's token %d is not above the revoked holder's %d", n.Token(), l.Token())
	}
	if err := f.Admit(ctx, "stuck", n.Token(), n.ID()); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, "stuck", l.Token(), l.ID()); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the revoked holder's late write: %v, want fence.ErrStale", err)
	}
	// Revoking a free name revokes nothing, and is no error.
	if err := n.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if rv, err := operator.Revoke(ctx, "stuck"); err != nil || rv.Holder != "" {
		t.Fatalf("Revoke of a free name: %+v, %v", rv, err)
	}
}

// A revocation hands the lock to the longest waiter, as an Unlock does,
// and Do's fn under the revoked lock sees its context end at the next
// keep-alive.
func TestRevokeHandsTheLockToTheWaiterAndEndsTheHoldersDo(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder := cl.newClient(t, redlock.WithTTL(3*time.Second))
	waiter := cl.newClient(t, redlock.WithRetryDelay(10*time.Second, 10*time.Second))
	operator := cl.newClient(t)
	running := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		ended <- holder.Do(ctx, "job", func(ctx context.Context, _ *redlock.Lock) error {
			close(running)
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	<-running
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(ctx, "job")
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond) // the waiter is refused, and queued
	if _, err := operator.Revoke(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not handed the revoked lock within 5 s (its retry delay is 10 s)")
	}
	select {
	case err := <-ended:
		if !errors.Is(err, redlock.ErrExpired) && !errors.Is(err, context.Canceled) {
			t.Logf("the revoked Do returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked holder's Do still runs 5 s after the revocation (TTL 3 s, keep-alive every second)")
	}
}

// Bad input and faults: a bad name, a key of another type, too few nodes.
func TestRevokeRefusesBadInputAndSaysWhyItFailed(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t, redlock.WithNodeTimeout(200*time.Millisecond))
	if _, err := c.Revoke(ctx, ""); !errors.Is(err, redlock.ErrEmptyName) {
		t.Fatalf("empty name: %v, want ErrEmptyName", err)
	}
	for _, n := range cl.inspect {
		n.LPush(ctx, "redlock:{listed}", "x")
	}
	var wt *redlock.WrongTypeError
	if _, err := c.Revoke(ctx, "listed"); !errors.Is(err, redlock.ErrWrongType) || !errors.As(err, &wt) || wt.Key != "redlock:{listed}" {
		t.Fatalf("a list under the lock key: %v, want ErrWrongType naming it", err)
	}
	l, err := c.TryLock(ctx, "down")
	if err != nil {
		t.Fatal(err)
	}
	cl.nodes[0].Kill(ctx)
	cl.nodes[1].Kill(ctx)
	// Revoke reads first: with no majority to read, it revokes nothing.
	rv, err := c.Revoke(ctx, "down")
	if !errors.Is(err, redlock.ErrUnavailable) || len(rv.Revoked) != 0 {
		t.Fatalf("two of three nodes down: %+v, %v; want ErrUnavailable and nothing revoked", rv, err)
	}
	if got := cl.inspect[2].Get(ctx, "redlock:{down}").Val(); got != l.ID() {
		t.Fatalf("after a Revoke that could not read a majority node 2 holds %q, want %q", got, l.ID())
	}
	// RevokeHolder names the hold: the node that answers is revoked.
	rv, err = c.RevokeHolder(ctx, "down", l.ID())
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("RevokeHolder, two of three nodes down: %v, want ErrUnavailable", err)
	}
	if rv.Revoked[2] != l.ID() {
		t.Fatalf("the node that answered revoked %q, want %q", rv.Revoked[2], l.ID())
	}
	if _, err := c.RevokeHolder(ctx, "down", "not-an-id"); !errors.Is(err, redlock.ErrBadID) {
		t.Fatalf("RevokeHolder with a bad id: %v, want ErrBadID", err)
	}
}

// A read-write lock's revocation releases its writer, or every reader, and
// a semaphore's the permit named by its ID: the revoked holds cannot
// extend, and the lock or the slots are free again.
func TestRevokeTheFamilysHolds(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	holder := cl.newClient(t, redlock.WithTTL(time.Minute))
	operator := cl.newClient(t)

	rw := rwMutex(t, holder, "table")
	w, err := rw.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := rwMutex(t, operator, "table").Revoke(ctx)
	if err != nil || rv.Holder != w.ID() || len(rv.Readers) != 0 {
		t.Fatalf("revoking the writer: %+v, %v; want %s", rv, err, w.ID())
	}
	if err := w.Extend(ctx); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("the revoked writer's Extend: %v, want ErrExpired", err)
	}
	r1, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rv, err = rwMutex(t, operator, "table").Revoke(ctx)
	if err != nil || rv.Holder != "" || len(rv.Readers) != 2 {
		t.Fatalf("revoking two readers: %+v, %v", rv, err)
	}
	for _, r := range []*redlock.RWLock{r1, r2} {
		if err := r.Extend(ctx); !errors.Is(err, redlock.ErrExpired) {
			t.Fatalf("a revoked reader's Extend: %v, want ErrExpired", err)
		}
	}
	w2, err := rwMutex(t, operator, "table").TryLock(ctx)
	if err != nil {
		t.Fatalf("a write after the readers were revoked: %v", err)
	}
	if w2.Token() <= w.Token() {
		t.Fatalf("the next writer's token %d is not above the revoked writer's %d", w2.Token(), w.Token())
	}
	_ = w2.Unlock(ctx)

	s := semaphore(t, holder, "pool", 2)
	p, err := s.TryAcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	rv, err = semaphore(t, operator, "pool", 2).Revoke(ctx, p.ID())
	if err != nil || rv.Holder != p.ID() {
		t.Fatalf("revoking a permit: %+v, %v", rv, err)
	}
	if err := p.Extend(ctx); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("the revoked permit's Extend: %v, want ErrExpired", err)
	}
	q, err := semaphore(t, operator, "pool", 2).TryAcquireN(ctx, 2)
	if err != nil {
		t.Fatalf("both permits after the revocation: %v", err)
	}
	_ = q.Release(ctx)
	if rv, err := semaphore(t, operator, "pool", 2).Revoke(ctx, p.ID()); err != nil || rv.Holder != "" {
		t.Fatalf("revoking a permit no longer held: %+v, %v", rv, err)
	}
}
