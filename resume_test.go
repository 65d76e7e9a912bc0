package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Another process resumes a hold by its ID (issue 35: Redisson's permit
// id): the handle extends it, keeps its token, and its Unlock frees the
// lock for everyone, after which the original's Extend fails.
func TestResumeGivesAnotherProcessTheSameHold(t *testing.T) {
	cl := startCluster(t, 5)
	ctx := context.Background()
	taker := cl.newClient(t)
	runner := cl.newClient(t)
	l, err := taker.TryLock(ctx, "handed", redlock.For(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.Resume(ctx, "handed", l.ID(), redlock.For(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID() != l.ID() || r.Token() != l.Token() || r.Token() == 0 {
		t.Fatalf("resumed ID %s token %d, want the hold's %s and %d", r.ID(), r.Token(), l.ID(), l.Token())
	}
	if !r.Until().After(l.Until()) {
		t.Fatalf("the resumed hold runs until %v, not after the original's %v: Resume did not extend it", r.Until(), l.Until())
	}
	if _, err := runner.TryLock(ctx, "handed"); !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("TryLock beside the resumed hold: %v, want ErrLocked", err)
	}
	if err := r.Extend(ctx); err != nil {
		t.Fatalf("the resumed hold's Extend: %v", err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("the original's Extend after the resumed Unlock: %v, want ErrExpired", err)
	}
	n, err := taker.TryLock(ctx, "handed")
	if err != nil {
		t.Fatalf("TryLock after the resumed Unlock: %v", err)
	}
	if n.Token() <= r.Token() {
		t.Fatalf("next token %d not above the resumed hold's %d", n.Token(), r.Token())
	}
	_ = n.Unlock(ctx)
}

// A hold that is gone (released, revoked) cannot be resumed, and an ID or
// a name that no hold can have is refused before anything is sent.
func TestResumeRefusesAGoneHoldAndBadIDs(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t)
	l, err := c.TryLock(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	id := l.ID()
	if _, err := c.Revoke(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, "gone", id); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("Resume of a revoked hold: %v, want ErrExpired", err)
	}
	other, err := c.TryLock(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock(ctx)
	if _, err := c.Resume(ctx, "gone", id); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("Resume of a hold another holder replaced: %v, want ErrExpired", err)
	}
	for _, bad := range []string{"", "zz", other.ID() + "0", "ABCDEF0123456789ABCDEF0123456789"} {
		if _, err := c.Resume(ctx, "gone", bad); !errors.Is(err, redlock.ErrBadID) {
			t.Fatalf("Resume(%q): %v, want ErrBadID", bad, err)
		}
	}
	if _, err := c.Resume(ctx, "", other.ID()); !errors.Is(err, redlock.ErrEmptyName) {
		t.Fatalf("Resume of an empty name: %v, want ErrEmptyName", err)
	}
	if _, err := c.Resume(ctx, "gone", other.ID(), redlock.For(time.Millisecond)); err == nil {
		t.Fatal("Resume with a TTL too short for any validity succeeded")
	}
}

// A permit resumed by its ID in another process (Redisson's permit ids)
// keeps its slots and token; its release frees the slots for the next
// acquisition; a permit that is gone cannot be resumed.
func TestResumeAPermitByItsID(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	taker := cl.newClient(t)
	other := cl.newClient(t)
	s := must(taker.Semaphore("pool", 3))(t)
	p, err := s.TryAcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	s2 := must(other.Semaphore("pool", 3))(t)
	q, err := s2.Resume(ctx, p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if q.ID() != p.ID() || q.Token() != p.Token() || !slices.Equal(q.Slots(), p.Slots()) {
		t.Fatalf("resumed %s slots %v token %d, want %s %v %d", q.ID(), q.Slots(), q.Token(), p.ID(), p.Slots(), p.Token())
	}
	if err := q.Extend(ctx); err != nil {
		t.Fatalf("the resumed permit's Extend: %v", err)
	}
	if _, err := s2.TryAcquireN(ctx, 2); !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("two more permits of 3 beside the resumed 2: %v, want ErrLocked", err)
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := s2.TryAcquireN(ctx, 3)
	if err != nil {
		t.Fatalf("all 3 permits after the resumed permit's release: %v", err)
	}
	defer r.Release(ctx)
	if _, err := s2.Resume(ctx, p.ID()); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("Resume of a released permit: %v, want ErrExpired", err)
	}
	if _, err := s2.Resume(ctx, "nope"); !errors.Is(err, redlock.ErrBadID) {
		t.Fatalf("Resume(\"nope\"): %v, want ErrBadID", err)
	}
}
