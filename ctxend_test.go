package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// When the caller's deadline ends before a round is decided (a majority
// silent: the round would wait up to its patience), the error still says
// what failed and why on each node (issue 23, 2): a *QuorumError with a
// Kind, every node's outcome with its cause, and ctx's error as Cause.

// wantCutShort checks err: a *QuorumError of kind whose Cause is
// context.DeadlineExceeded and in which every node has an outcome with a
// cause.
func wantCutShort(t *testing.T, err, kind error) {
	t.Helper()
	qe := quorumError(t, err)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(qe.Cause, context.DeadlineExceeded) {
		t.Errorf("want ctx's error as the cause, got %v", err)
	}
	if !errors.Is(err, kind) {
		t.Errorf("want kind %v, got %v (kind %v)", kind, err, qe.Kind)
	}
	wantCauses(t, qe)
	t.Logf("%v", err)
}

const cutShortAfter = 300 * time.Millisecond

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), cutShortAfter)
	t.Cleanup(cancel)
	return ctx
}

func TestTryLockCutShortByCtxSaysWhy(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			cl := startCluster(t, 5)
			var opts []redlock.Option
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
			}
			c := cl.newClient(t, opts...)
			if l, err := c.TryLock(context.Background(), "warm"); err != nil { // the node list is checked
				t.Fatal(err)
			} else if err := l.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			cl.pause(t, 0, 1, 2)
			_, err := c.TryLock(shortCtx(t), "cut-short")
			wantCutShort(t, err, redlock.ErrUnavailable)
		})
	}
}

// A fresh client's first attempt waits for the check of the node list;
// with every node paused the check outlasts the deadline.
func TestFirstTryLockCutShortByCtxSaysWhy(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	cl.pause(t, 0, 1, 2)
	_, err := c.TryLock(shortCtx(t), "cut-short-first")
	wantCutShort(t, err, redlock.ErrUnavailable)
}

func TestLockCutShortByCtxSaysWhy(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t)
	if l, err := c.TryLock(context.Background(), "warm"); err != nil {
		t.Fatal(err)
	} else if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 0, 1, 2)
	_, err := c.Lock(shortCtx(t), "cut-short-lock")
	wantCutShort(t, err, redlock.ErrUnavailable)
}

func TestExtendAndUnlockCutShortByCtxSayWhy(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t)
	l, err := c.TryLock(context.Background(), "cut-short-held")
	if err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 0, 1, 2)
	err = l.Extend(shortCtx(t))
	wantCutShort(t, err, redlock.ErrUnavailable)
	err = l.Unlock(shortCtx(t))
	wantCutShort(t, err, redlock.ErrUnavailable)
	resume()
}

// A wait ended by its context does not say the nodes are down (issue 35):
// every waiting call of the family, cancelled after 0-3 ms with nobody
// else holding anything, said ErrUnavailable ("too few nodes answered:
// context canceled") 77-122 times in 200. Now the Kind is what the nodes
// said before ctx ended, and none here failed: never ErrUnavailable.
func TestWaitsCancelledEarlyDoNotSayUnavailable(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t)
	bg := context.Background()
	if l, err := c.TryLock(bg, "warm"); err != nil { // the node list is checked
		t.Fatal(err)
	} else if err := l.Unlock(bg); err != nil {
		t.Fatal(err)
	}
	s := must(c.Semaphore("ce-sem", 3))(t)
	rw := must(c.RWMutex("ce-rw"))(t)
	calls := map[string]func(ctx context.Context) (func() error, error){
		"Lock(Reentrant)": func(ctx context.Context) (func() error, error) {
			l, err := c.Lock(ctx, "ce-lock", redlock.Reentrant())
			return func() error { return l.Unlock(bg) }, err
		},
		"Acquire": func(ctx context.Context) (func() error, error) {
			p, err := s.Acquire(ctx)
			return func() error { return p.Release(bg) }, err
		},
		"AcquireN(2)": func(ctx context.Context) (func() error, error) {
			p, err := s.AcquireN(ctx, 2)
			return func() error { return p.Release(bg) }, err
		},
		"RLock": func(ctx context.Context) (func() error, error) {
			l, err := rw.RLock(ctx)
			return func() error { return l.Unlock(bg) }, err
		},
		"rw.Lock": func(ctx context.Context) (func() error, error) {
			l, err := rw.Lock(ctx)
			return func() error { return l.Unlock(bg) }, err
		},
		"LockMulti": func(ctx context.Context) (func() error, error) {
			m, err := c.LockMulti(ctx, []string{"ce-a", "ce-b"})
			return func() error { return m.Unlock(bg) }, err
		},
	}
	const tries = 50
	for name, call := range calls {
		unavailable := 0
		var first error
		for i := range tries {
			ctx, cancel := context.WithCancel(bg)
			time.AfterFunc(time.Duration(i%4)*time.Millisecond, cancel)
			release, err := call(ctx)
			cancel()
			if err == nil {
				if err := release(); err != nil {
					t.Fatalf("%s: release: %v", name, err)
				}
				continue
			}
			if errors.Is(err, redlock.ErrUnavailable) {
				unavailable++
				if first == nil {
					first = err
				}
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want ctx's error as the cause", name, err)
			}
		}
		if unavailable > 0 {
			t.Errorf("%s: %d of %d cancelled waits said ErrUnavailable (first: %v)", name, unavailable, tries, first)
		}
	}
}
