package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// holdFirst holds the first call of one script on its wire until release
// is closed, then sends it whatever became of its caller's ctx: a call
// buffered on the way to its node, which lands late.
type holdFirst struct {
	name    string
	once    sync.Once
	held    chan struct{} // closed once the first call is held
	release chan struct{}
	landed  chan struct{} // closed once the held call has run on the node
	opened  sync.Once
}

// open lets the held call go on.
func (h *holdFirst) open() { h.opened.Do(func() { close(h.release) }) }

func newHoldFirst(name string) *holdFirst {
	return &holdFirst{name: name, held: make(chan struct{}), release: make(chan struct{}), landed: make(chan struct{})}
}

func (h *holdFirst) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) != h.name {
			return next(ctx, cmd)
		}
		first := false
		h.once.Do(func() { first = true })
		if !first {
			return next(ctx, cmd)
		}
		close(h.held)
		<-h.release
		err := next(context.WithoutCancel(ctx), cmd)
		close(h.landed)
		return err
	}
}

// holder is what every primitive's hold offers an Extend through.
type holder interface {
	Extend(ctx context.Context, opts ...redlock.LockOption) error
	Until() time.Time
}

// lateShorteningCase is one primitive in the late-shortening replay: its
// extension script, A's hold, and B's conflicting grant (when it came).
type lateShorteningCase struct {
	script string
	takeA  func(t *testing.T, c *redlock.Client, name string) holder
	takeB  func(ctx context.Context, c *redlock.Client, name string) (granted time.Time, err error)
}

var lateShorteningCases = map[string]lateShorteningCase{
	"mutex": {"extend",
		func(t *testing.T, c *redlock.Client, name string) holder {
			return must(c.TryLock(context.Background(), name))(t)
		},
		func(ctx context.Context, c *redlock.Client, name string) (time.Time, error) {
			l, err := c.TryLock(ctx, name)
			if err != nil {
				return time.Time{}, err
			}
			return time.Now(), l.Unlock(ctx)
		}},
	"read-hold": {"rw-extend",
		func(t *testing.T, c *redlock.Client, name string) holder {
			return must(must(c.RWMutex(name))(t).TryRLock(context.Background()))(t)
		},
		func(ctx context.Context, c *redlock.Client, name string) (time.Time, error) {
			rw, err := c.RWMutex(name)
			if err != nil {
				return time.Time{}, err
			}
			l, err := rw.TryLock(ctx)
			if err != nil {
				return time.Time{}, err
			}
			return time.Now(), l.Unlock(ctx)
		}},
	"permit": {"sem-extend",
		func(t *testing.T, c *redlock.Client, name string) holder {
			return must(must(c.Semaphore(name, 1))(t).TryAcquire(context.Background()))(t)
		},
		func(ctx context.Context, c *redlock.Client, name string) (time.Time, error) {
			s, err := c.Semaphore(name, 1)
			if err != nil {
				return time.Time{}, err
			}
			p, err := s.TryAcquire(ctx)
			if err != nil {
				return time.Time{}, err
			}
			return time.Now(), p.Release(ctx)
		}},
	"multi-lock": {"multi-extend",
		func(t *testing.T, c *redlock.Client, name string) holder {
			return must(c.TryLockMulti(context.Background(), []string{name + "-a", name + "-b"}))(t)
		},
		func(ctx context.Context, c *redlock.Client, name string) (time.Time, error) {
			l, err := c.TryLock(ctx, name+"-b")
			if err != nil {
				return time.Time{}, err
			}
			return time.Now(), l.Unlock(ctx)
		}},
}

// grantB retries tc's conflicting grant for B for up to 5 s, while A's
// keys expire, and returns when it was granted, or the last error.
func (tc lateShorteningCase) grantB(ctx context.Context, b *redlock.Client, name string) (granted time.Time, err error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		granted, err = tc.takeB(ctx, b, name)
		if err == nil || time.Now().After(deadline) {
			return granted, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// must returns v once the test has checked err.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// Issue 32, the late shortening: A holds "x" for 3 s on n0 and n1 (n2 cut
// off for A); Extend(For(400ms)) fails, its call to n1 still on the way; a
// second Extend succeeds on {n0, n1}; then the shortening lands on n1,
// which keeps the key 400 ms; B takes {n1, n2}. Before the fix A's Until
// was 3 s out after the second Extend, and B was granted with 2.5 s of A's
// validity left (every primitive below failed so). Now the second Extend
// counts n1 for the 400 ms its unheard call may leave there, so A's
// validity has ended when B is granted.
func TestLateShorteningDoesNotOutliveALaterExtend(t *testing.T) {
	cl := startCluster(t, 3)
	for kind, tc := range lateShorteningCases {
		t.Run(kind, func(t *testing.T) {
			name := "late-shortening-" + kind
			hold := newHoldFirst(tc.script)
			t.Cleanup(hold.open) // before the client's Close, which waits for the held call
			a := cl.hookedOn(t, map[int]redis.Hook{1: hold, 2: cut()},
				redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
			b := cl.newClient(t, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))
			ctx := context.Background()
			l := tc.takeA(t, a, name)
			short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			err := l.Extend(short, redlock.For(400*time.Millisecond))
			cancel()
			if err == nil {
				t.Fatal("the shortening succeeded: its call to n1 was meant to be held")
			}
			select {
			case <-hold.held:
			case <-time.After(5 * time.Second):
				t.Fatalf("the shortening's call never reached n1 (it said %v)", err)
			}
			if err := l.Extend(ctx); err != nil {
				t.Fatalf("second Extend: %v", err)
			}
			hold.open()
			<-hold.landed
			// n1's key now lives 400 ms from the landing; B waits for it.
			granted, err := tc.grantB(ctx, b, name)
			if err != nil {
				t.Fatalf("B was never granted, though n1 let the key go after 400 ms: %v", err)
			}
			if left := l.Until().Sub(granted); left > 0 {
				t.Fatalf("B was granted %q while A still had %v of validity", name, left)
			}
		})
	}
}

// holdReplies lets every call of one script run on its node, then holds
// its reply until release is closed: an Extend whose calls have all taken
// effect, still waiting to hear of them.
type holdReplies struct {
	name    string
	ran     chan struct{} // one send per call that has run on its node
	release chan struct{}
}

func newHoldReplies(name string) *holdReplies {
	return &holdReplies{name: name, ran: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *holdReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) != h.name {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		h.ran <- struct{}{}
		<-h.release
		return err
	}
}

// Issue 32, a shortening in flight: A holds "x" for 3 s and calls
// Extend(For(400ms)); its calls shorten the key on every node at once, but
// their replies are held. Before the fix A's Until moved only when the
// Extend returned, so while it waited B was granted with 2.5 s of A's
// validity left. Now a shortening pulls Until back before it sends.
func TestShorteningInFlightMovesUntilAtOnce(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	for kind, tc := range lateShorteningCases {
		t.Run(kind, func(t *testing.T) {
			name := "in-flight-" + kind
			hold := newHoldReplies(tc.script)
			var once sync.Once
			open := func() { once.Do(func() { close(hold.release) }) }
			t.Cleanup(open)
			a := cl.hookedOn(t, map[int]redis.Hook{0: hold, 1: hold, 2: hold},
				redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(150*time.Millisecond))
			b := cl.newClient(t, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))
			ctx := context.Background()
			l := tc.takeA(t, a, name)
			extended := make(chan error, 1)
			go func() { extended <- l.Extend(ctx, redlock.For(400*time.Millisecond)) }()
			for range 3 {
				select {
				case <-hold.ran:
				case <-time.After(5 * time.Second):
					t.Fatal("the shortening never ran on all three nodes")
				}
			}
			granted, err := tc.grantB(ctx, b, name)
			until := l.Until()
			open()
			<-extended
			if err != nil {
				t.Fatalf("B was never granted, though the nodes let the key go after 400 ms: %v", err)
			}
			if left := until.Sub(granted); left > 0 {
				t.Fatalf("B was granted %q while A's shortening was in flight and A had %v of validity", name, left)
			}
		})
	}
}

// landDuringSecond holds the first call of one script on its wire, and
// lets it land during the next one that runs the script on the node: after
// that call has run, and before its reply goes back. (A call refused
// NOSCRIPT ran nothing: the held call may be the one that would have
// loaded the script.)
type landDuringSecond struct {
	*holdFirst
	mu    sync.Mutex
	calls int
}

func (h *landDuringSecond) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	first := h.holdFirst.ProcessHook(next)
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) != h.name {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		h.calls++
		n := h.calls
		h.mu.Unlock()
		if n == 1 {
			return first(ctx, cmd)
		}
		err := next(ctx, cmd)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			return err
		}
		select {
		case <-h.landed:
			return err
		case <-h.held:
		}
		h.open()
		<-h.landed
		// Let the first call's reply reach the lease before this one's.
		time.Sleep(20 * time.Millisecond)
		return err
	}
}

// Issue 32, a late call heard during a later Extend: A's Extend(For(400ms))
// fails with its call to n1 held (n2 cut off for A); A's next Extend (3 s)
// runs on n1, then the held call lands there and its reply comes back, then
// the Extend's own reply. Before the fix the late call, heard by the time
// the Extend was counted, no longer cut n1, and B was granted with 2.5 s of
// A's validity left. Now the calls unheard when an Extend begins count.
func TestLateCallHeardDuringALaterExtendStillCounts(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	for kind, tc := range lateShorteningCases {
		t.Run(kind, func(t *testing.T) {
			name := "heard-during-" + kind
			hold := &landDuringSecond{holdFirst: newHoldFirst(tc.script)}
			t.Cleanup(hold.open)
			a := cl.hookedOn(t, map[int]redis.Hook{1: hold, 2: cut()},
				redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(150*time.Millisecond))
			b := cl.newClient(t, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))
			ctx := context.Background()
			l := tc.takeA(t, a, name)
			short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			err := l.Extend(short, redlock.For(400*time.Millisecond))
			cancel()
			if err == nil {
				t.Fatal("the shortening succeeded: its call to n1 was meant to be held")
			}
			select {
			case <-hold.held:
			case <-time.After(5 * time.Second):
				t.Fatalf("the shortening's call never reached n1 (it said %v)", err)
			}
			if err := l.Extend(ctx, redlock.For(3*time.Second)); err != nil {
				t.Fatalf("second Extend: %v", err)
			}
			select {
			case <-hold.landed:
			default:
				t.Fatal("the held call did not land during the second Extend")
			}
			granted, err := tc.grantB(ctx, b, name)
			if err != nil {
				t.Fatalf("B was never granted, though n1 let the key go after 400 ms: %v", err)
			}
			if left := l.Until().Sub(granted); left > 0 {
				t.Fatalf("B was granted %q while A still had %v of validity", name, left)
			}
		})
	}
}
