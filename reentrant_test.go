package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
)

// A reentry through the context that holds the lock gets a handle on the
// same lease at once: the same token and Until, nothing sent to the nodes.
// Its Unlock only counts down; the outermost Unlock releases.
func TestReentrySharesTheLeaseAndTheOutermostUnlockReleases(t *testing.T) {
	cl := startCluster(t, 3)
	var calls atomic.Int32
	c := cl.hooked(t, afterHook(func(context.Context, string) { calls.Add(1) }))
	other := cl.newClient(t)
	ctx := context.Background()
	outer, err := c.Lock(ctx, "re")
	if err != nil {
		t.Fatal(err)
	}
	held := outer.Context(ctx)
	// The outer Lock returned at a majority: the last node's calls may
	// still be on their way (the Valkey pass once counted one). Let them
	// land before counting.
	for last, quiet := calls.Load(), 0; quiet < 10; time.Sleep(10 * time.Millisecond) {
		if n := calls.Load(); n != last {
			last, quiet = n, 0
		} else {
			quiet++
		}
	}
	before := calls.Load()
	inner, err := c.Lock(held, "re", redlock.Reentrant())
	if err != nil {
		t.Fatalf("reentrant Lock: %v", err)
	}
	inner2, err := c.TryLock(held, "re", redlock.Reentrant())
	if err != nil {
		t.Fatalf("reentrant TryLock: %v", err)
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the reentries sent %d commands to the nodes, want 0", n)
	}
	for _, h := range []*redlock.Lock{inner, inner2} {
		if h.Token() != outer.Token() || !h.Until().Equal(outer.Until()) || h.Done() != outer.Done() {
			t.Errorf("a reentry has token %d, Until %v; the lock has %d, %v", h.Token(), h.Until(), outer.Token(), outer.Until())
		}
	}
	for _, h := range []*redlock.Lock{inner2, inner, inner} { // a second Unlock of a handle counts nothing
		if err := h.Unlock(ctx); err != nil {
			t.Fatalf("inner Unlock: %v", err)
		}
		if _, err := other.TryLock(ctx, "re"); !errors.Is(err, redlock.ErrLocked) {
			t.Fatalf("another client after an inner Unlock: %v, want ErrLocked", err)
		}
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatalf("outer Unlock: %v", err)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Errorf("second outer Unlock: %v, want the first's result", err)
	}
	if got := cl.holdersOnceReleased(t, "re"); strings.Join(got, "") != "" {
		t.Errorf("held after the outermost Unlock: %q", got)
	}
}

// The outermost Unlock releases, whatever reentries are still open (the
// design note's rule, so that Do releases when fn returns even if fn left
// a reentry open); the reentry's Unlock after it changes nothing, and a
// new reentry is refused.
func TestTheOutermostUnlockReleases(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	outer, err := c.Lock(ctx, "last")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Lock(outer.Context(ctx), "last", redlock.Reentrant())
	if err != nil {
		t.Fatal(err)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cl.holdersOnceReleased(t, "last"); strings.Join(got, "") != "" {
		t.Fatalf("held after the outermost Unlock, with a reentry open: %q", got)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Errorf("the open reentry's Unlock after the outermost: %v", err)
	}
	if _, err := c.Lock(outer.Context(ctx), "last", redlock.Reentrant()); !errors.Is(err, redlock.ErrReleased) {
		t.Errorf("reentry of a released lock: %v, want ErrReleased", err)
	}
}

// The trap of a reentry with a fresh token (Redisson's fenced lock): the
// inner frame's write raises the fence, and the outer frame's next write,
// with the token it was given, is refused as stale. With the same token
// for every reentry, both frames' writes pass. The replay runs both: the
// rule removed (FreshTokenReentry) must show the refusal.
func TestReentryKeepsTheTokenSoTheOuterFramesWritesPass(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	for _, fresh := range []bool{false, true} {
		f := &fence.Memory{}
		outer, err := c.Lock(ctx, "frames")
		if err != nil {
			t.Fatal(err)
		}
		token := outer.Token()
		if err := f.Admit(ctx, "row", token, "job"); err != nil {
			t.Fatal(err)
		}
		var innerToken uint64
		if fresh {
			if innerToken, err = redlock.FreshTokenReentry(ctx, outer); err != nil {
				t.Fatal(err)
			}
		} else {
			inner, err := c.Lock(outer.Context(ctx), "frames", redlock.Reentrant())
			if err != nil {
				t.Fatal(err)
			}
			innerToken = inner.Token()
			defer inner.Unlock(ctx)
		}
		if err := f.Admit(ctx, "row", innerToken, "job"); err != nil {
			t.Fatalf("fresh=%v: the inner frame's write: %v", fresh, err)
		}
		err = f.Admit(ctx, "row", token, "job")
		switch {
		case !fresh && err != nil:
			t.Errorf("the outer frame's write after a reentry: %v, want it accepted", err)
		case fresh && !errors.Is(err, fence.ErrStale):
			t.Errorf("rule removed (fresh token %d > %d): the outer frame's write: %v, want ErrStale", innerToken, token, err)
		}
		if err := outer.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Reentry is scoped by the context, not the goroutine: another goroutine
// with the context reenters, a context that does not carry the lock does
// not (it acquires, and is refused), nor does another client's.
func TestReentryIsScopedByTheContext(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	other := cl.newClient(t)
	ctx := context.Background()
	outer, err := c.Lock(ctx, "scope")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock(ctx)
	held := outer.Context(ctx)
	got := make(chan error, 1)
	go func() {
		l, err := c.TryLock(held, "scope", redlock.Reentrant())
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	if err := <-got; err != nil {
		t.Errorf("reentry from another goroutine: %v", err)
	}
	if _, err := c.TryLock(ctx, "scope", redlock.Reentrant()); !errors.Is(err, redlock.ErrLocked) {
		t.Errorf("Reentrant through a context without the lock: %v, want ErrLocked", err)
	}
	if _, err := other.TryLock(held, "scope", redlock.Reentrant()); !errors.Is(err, redlock.ErrLocked) {
		t.Errorf("another client's Reentrant through the holding context: %v, want ErrLocked", err)
	}
	if _, err := c.TryLock(held, "scope"); !errors.Is(err, redlock.ErrLocked) {
		t.Errorf("TryLock without Reentrant through the holding context: %v, want ErrLocked", err)
	}
	cancelled, cancel := context.WithCancel(held)
	cancel()
	if _, err := c.Lock(cancelled, "scope", redlock.Reentrant()); !errors.Is(err, context.Canceled) {
		t.Errorf("reentry through a cancelled context: %v, want context.Canceled", err)
	}
}

// A reentry never shortens the lease (Redisson #1110): its For is ignored.
// A reentry of an expired lock fails; Extend refuses Reentrant.
func TestReentryNeverShortensTheLease(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(time.Minute))
	ctx := context.Background()
	outer, err := c.Lock(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock(ctx)
	inner, err := c.Lock(outer.Context(ctx), "long", redlock.Reentrant(), redlock.For(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !inner.Until().Equal(outer.Until()) {
		t.Errorf("a reentry with For(1s) moved Until: %v -> %v", outer.Until(), inner.Until())
	}
	if ttl, err := cl.inspect[0].PTTL(ctx, "redlock:{long}").Result(); err != nil || ttl < 50*time.Second {
		t.Errorf("the key's PTTL after a reentry with For(1s): %v, %v", ttl, err)
	}
	if err := inner.Extend(ctx, redlock.Reentrant()); !errors.Is(err, redlock.ErrNotForExtend) {
		t.Errorf("Extend(Reentrant()): %v, want ErrNotForExtend", err)
	}

	short := cl.newClient(t, redlock.WithTTL(200*time.Millisecond))
	l, err := short.Lock(ctx, "brief")
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if _, err := short.Lock(l.Context(ctx), "brief", redlock.Reentrant()); !errors.Is(err, redlock.ErrExpired) {
		t.Errorf("reentry of an expired lock: %v, want ErrExpired", err)
	}
}

// Do's function context carries the lock: a nested reentrant Do runs at
// once on the same lock, and the lock stays held until the outer Do ends.
func TestNestedReentrantDo(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(300*time.Millisecond))
	other := cl.newClient(t)
	ctx := context.Background()
	var innerRan bool
	err := c.Do(ctx, "nest", func(ctx context.Context, outer *redlock.Lock) error {
		err := c.Do(ctx, "nest", func(ctx context.Context, inner *redlock.Lock) error {
			innerRan = inner.Token() == outer.Token()
			time.Sleep(700 * time.Millisecond) // past two TTLs: the outer Do's watchdog keeps it
			return context.Cause(ctx)
		}, redlock.Reentrant())
		if err != nil {
			return err
		}
		if _, err := other.TryLock(ctx, "nest"); !errors.Is(err, redlock.ErrLocked) {
			t.Errorf("after the inner Do, another client: %v, want ErrLocked", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !innerRan {
		t.Error("the inner Do did not run with the outer lock's token")
	}
	if got := cl.holdersOnceReleased(t, "nest"); strings.Join(got, "") != "" {
		t.Errorf("held after the outer Do: %q", got)
	}
}

// A waiting multi-lock asked through a context that holds one of its
// members fails at once with ErrHeldByContext (issue 34): it used to wait
// for its caller's own lock to expire (10 s), take the set, and leave the
// outer Unlock to say ErrExpired. The outer lock is untouched.
func TestLockMultiThroughAContextHoldingAMemberFailsAtOnce(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(10*time.Second))
	ctx := context.Background()
	outer, err := c.Lock(ctx, "hm-a")
	if err != nil {
		t.Fatal(err)
	}
	held := outer.Context(ctx)
	wait, cancel := context.WithTimeout(held, 5*time.Second)
	defer cancel()
	if _, err := c.LockMulti(wait, []string{"hm-a", "hm-b"}); !errors.Is(err, redlock.ErrHeldByContext) {
		t.Fatalf("LockMulti through the holder's context: %v, want ErrHeldByContext", err)
	}
	if wait.Err() != nil {
		t.Fatal("LockMulti waited for its own member")
	}
	err = c.DoMulti(held, []string{"hm-b", "hm-a"}, func(context.Context, *redlock.MultiLock) error { return nil })
	if !errors.Is(err, redlock.ErrHeldByContext) {
		t.Fatalf("DoMulti through the holder's context: %v, want ErrHeldByContext", err)
	}
	// The other member was not left taken, and the outer lock is as it was.
	if l, err := c.TryLock(ctx, "hm-b"); err != nil {
		t.Fatalf("hm-b after the refusals: %v", err)
	} else if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatalf("outer Unlock: %v", err)
	}
	// Released, the context no longer holds it: LockMulti goes ahead.
	m, err := c.LockMulti(held, []string{"hm-a", "hm-b"})
	if err != nil {
		t.Fatalf("LockMulti once the outer lock was released: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Reentrant given to an acquisition that has no reentry is a typed error,
// before anything is sent (issue 34): it was accepted and ignored.
func TestReentrantIsRefusedWhereItCannotApply(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	s, err := c.Semaphore("cr-sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"TryLockMulti": func() error { _, err := c.TryLockMulti(ctx, []string{"cr-a", "cr-b"}, redlock.Reentrant()); return err },
		"LockMulti":    func() error { _, err := c.LockMulti(ctx, []string{"cr-a", "cr-b"}, redlock.Reentrant()); return err },
		"DoMulti": func() error {
			return c.DoMulti(ctx, []string{"cr-a"}, func(context.Context, *redlock.MultiLock) error { return nil }, redlock.Reentrant())
		},
		"TryAcquire": func() error { _, err := s.TryAcquire(ctx, redlock.Reentrant()); return err },
		"Acquire":    func() error { _, err := s.Acquire(ctx, redlock.Reentrant()); return err },
		"AcquireN":   func() error { _, err := s.AcquireN(ctx, 2, redlock.Reentrant()); return err },
		"Do": func() error {
			return s.Do(ctx, func(context.Context, *redlock.Permit) error { return nil }, redlock.Reentrant())
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, redlock.ErrCannotReenter) {
			t.Errorf("%s with Reentrant: %v, want ErrCannotReenter", name, err)
		}
	}
	// Nothing was taken.
	m, err := c.TryLockMulti(ctx, []string{"cr-a", "cr-b"})
	if err != nil {
		t.Fatalf("the members after the refusals: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := s.TryAcquireN(ctx, 2)
	if err != nil {
		t.Fatalf("the permits after the refusals: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
