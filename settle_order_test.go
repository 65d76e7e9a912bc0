package redlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// The order of a client's own calls on a node: a release in flight before
// the next attempt, within the caller's deadline and budget.

// Review of issue 23, 2 (afterOwn vs ctx): this client's release of the
// name hangs on two paused nodes of three (SIGSTOP), so the Unlock fails
// and the next TryLock's calls on them wait for that release (afterOwn),
// which lasts the round's patience (5 s). The TryLock must still end at
// the caller's deadline, with a Kind and matching DeadlineExceeded.
// Origin: the adversarial review of issue 23 (availability under own releases).
func TestAfterOwnEndsAtTheCallersDeadline(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "review-hung")
	if err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 0, 2)
	uctx, ucancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ucancel()
	if err := l.Unlock(uctx); err == nil {
		t.Fatal("Unlock won with two nodes of three paused")
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		l, err := c.TryLock(tctx, "review-hung")
		if l != nil {
			l.Unlock(ctx)
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(4 * time.Second):
		resume()
		t.Fatal("TryLock with a 300 ms deadline still waits 4 s later, behind its own release on the paused nodes")
	}
	t.Logf("TryLock: %v", err)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("TryLock: %v, want a *QuorumError, ErrUnavailable, matching DeadlineExceeded", err)
	}
	resume()
}

// A client's own release still in flight is never another owner, whatever
// primitive took the name (settle.go, Lock.Unlock's doc, which
// MultiLock.Unlock says it follows). The forced order of
// TestOwnReleaseInFlightIsNeverAnotherOwner, across primitives: node 1's
// release is held back 300 ms on the wire, node 2's next acquisition 30 ms
// (past the grace once another node refused). A member released by this
// client's multi-lock must not refuse this client's next TryLock of the
// member, nor a Lock's release its next multi-lock: the settling is kept by
// lease name, and the multi-lock's is "a,b", not its members'.
// Origin: the adversarial review of the multi-lock.
func TestOwnReleaseInFlightAcrossPrimitives(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			cl := startCluster(t, 3)
			var armed atomic.Bool
			opts := []redlock.Option{redlock.WithNodeTimeout(50 * time.Millisecond)}
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
			}
			acquires := []string{"acquire", "acquire-unfenced", "multi-acquire"}
			c := cl.actor(t, []*faultHook{nil, delayScripts(&armed, 300*time.Millisecond, "release", "multi-release"),
				delayScripts(&armed, 30*time.Millisecond, acquires...)}, opts...)
			ctx := context.Background()
			t.Run("multi then member", func(t *testing.T) {
				m, err := c.TryLockMulti(ctx, []string{"own-a", "own-b"})
				if err != nil {
					t.Fatal(err)
				}
				armed.Store(true)
				if err := m.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
				l, err := c.TryLock(ctx, "own-a")
				armed.Store(false)
				if err != nil {
					t.Fatalf("TryLock of a member right after this client's multi-lock Unlock, its release to node 1 still in flight: %v", err)
				}
				_ = l.Unlock(ctx)
			})
			time.Sleep(500 * time.Millisecond) // every release landed
			t.Run("member then multi", func(t *testing.T) {
				l, err := c.TryLock(ctx, "own-c")
				if err != nil {
					t.Fatal(err)
				}
				armed.Store(true)
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
				m, err := c.TryLockMulti(ctx, []string{"own-c", "own-d"})
				armed.Store(false)
				if err != nil {
					t.Fatalf("TryLockMulti right after this client's Unlock of a member, its release to node 1 still in flight: %v", err)
				}
				_ = m.Unlock(ctx)
			})
		})
	}
}

// An Unlock of a stale handle (its lock expired, and the same client took
// the name again since) comes after the live lock's Unlock. Its release
// never wins, so it sets no until; when the client kept one release per
// name, it replaced the live one still in flight, the next attempt did not
// wait at all, and the counterexample of TestNextAttemptWaitsForItsOwnRelease
// came back (ErrLocked on a name nobody holds). Same delays as that test.
// Origin: the adversarial review of Unlock returning at the majority (settle.go).
func TestStaleUnlockDoesNotHideTheReleaseInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale bool // the expired handle is unlocked after the live one
		opts  []redlock.Option
	}{
		{"unfenced/control", false, []redlock.Option{redlock.WithoutFencing()}},
		{"unfenced/stale unlock", true, []redlock.Option{redlock.WithoutFencing()}},
		{"fenced/control", false, nil},
		{"fenced/stale unlock", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startCluster(t, 3)
			var armed atomic.Bool
			opts := append([]redlock.Option{redlock.WithTTL(300 * time.Millisecond),
				redlock.WithNodeTimeout(50 * time.Millisecond), redlock.WithTrace(lateReleaseTrace(&armed))}, tc.opts...)
			c := cl.newClient(t, opts...)
			ctx := context.Background()
			for i := range 5 {
				old, err := c.TryLock(ctx, "stale")
				if err != nil {
					t.Fatalf("cycle %d: first TryLock: %v", i, err)
				}
				// Let it expire on every node, as a holder stalled past its TTL.
				<-old.Done()
				if h := cl.holdersOnceReleased(t, "stale"); slices.ContainsFunc(h, func(v string) bool { return v != "" }) {
					t.Fatalf("old lock never expired: %q", h)
				}
				live, err := c.TryLock(ctx, "stale")
				if err != nil {
					t.Fatalf("cycle %d: second TryLock: %v", i, err)
				}
				armed.Store(true)
				if err := live.Unlock(ctx); err != nil {
					t.Fatalf("cycle %d: Unlock: %v", i, err)
				}
				if tc.stale {
					// The late deferred Unlock of the expired handle.
					if err := old.Unlock(ctx); !errors.Is(err, redlock.ErrExpired) {
						t.Fatalf("cycle %d: stale Unlock: %v, want ErrExpired", i, err)
					}
				}
				l, err := c.TryLock(ctx, "stale")
				armed.Store(false)
				if err != nil {
					t.Fatalf("cycle %d: TryLock right after this client's Unlock: %v", i, err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("cycle %d: last Unlock: %v", i, err)
				}
				if !tc.stale {
					_ = old.Unlock(ctx)
				}
			}
		})
	}
}

// The settle wait must not spend a caller's short ctx when the nodes that
// released make a majority on their own. Five nodes, one release 100 ms
// late: four nodes are free at once, and an attempt wins there. When Unlock
// waited the grace itself (20 ms at a 200 ms node timeout), a TryLock with a
// 15 ms budget then won; the first settle wait spent that budget and failed
// with DeadlineExceeded, having sent nothing. Now a wait that ctx would cut
// short is not begun.
// Origin: the adversarial review of Unlock returning at the majority (settle.go).
func TestSettleWaitLeavesTryLockItsBudget(t *testing.T) {
	cl := startCluster(t, 5)
	var armed atomic.Bool
	tr := &redlock.Trace{NodeCall: func(op string, node int) {
		if armed.Load() && op == "unlock" && node == 4 {
			time.Sleep(100 * time.Millisecond)
		}
	}}
	c := cl.newClient(t, redlock.WithoutFencing(), redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithTrace(tr))
	ctx := context.Background()
	for i := range 5 {
		l, err := c.TryLock(ctx, "budget")
		if err != nil {
			t.Fatalf("cycle %d: first TryLock: %v", i, err)
		}
		armed.Store(true)
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("cycle %d: Unlock: %v", i, err)
		}
		armed.Store(false)
		short, cancel := context.WithTimeout(ctx, 15*time.Millisecond)
		l, err = c.TryLock(short, "budget")
		cancel()
		if err != nil {
			t.Fatalf("cycle %d: TryLock(15 ms) right after Unlock, four of five nodes free: %v", i, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("cycle %d: second Unlock: %v", i, err)
		}
		time.Sleep(150 * time.Millisecond) // the straggler lands
	}
}

// The settle wait ends at a grace (three times the slowest reply) after the
// majority's last reply, but never past the time the collector gives up on
// silent nodes (lastReply + max(node timeout, slowest)), which is where
// Unlock's own wait for them used to end. Node timeout 160 ms, every release
// 150 ms slow (a loaded wire), node 2 paused after the acquisition: Unlock
// plus the next TryLock take about 2 x 150 ms; with the grace uncapped,
// about 4 x 150 ms.
// Origin: the adversarial review of Unlock returning at the majority (settle.go).
func TestSettleWaitNoLongerThanUnlockUsedToWait(t *testing.T) {
	cl := startCluster(t, 3)
	var armed atomic.Bool
	slowRelease := scriptHook(func(ctx context.Context, script string) error {
		if armed.Load() && script == "release" {
			time.Sleep(150 * time.Millisecond)
		}
		return nil
	})
	c := cl.hooked(t, slowRelease, redlock.WithoutFencing(), redlock.WithNodeTimeout(160*time.Millisecond))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = c.TryLock(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 2)
	armed.Store(true)
	start := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	unlocked := time.Since(start)
	armed.Store(false)
	l, err = c.TryLock(ctx, "slow")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	t.Logf("Unlock returned after %v, the next TryLock after %v", unlocked, took)
	// Unlock used to wait at most about 2 x 150 ms here; the uncapped grace
	// made it about 4 x 150 ms.
	if took > 450*time.Millisecond {
		t.Errorf("Unlock + next TryLock took %v; Unlock alone used to wait at most ~310 ms", took)
	}
	resume()
	_ = l.Unlock(ctx)
}

// Entries of settling are dropped once every call of their release ended:
// with a node paused through Unlock and Close, with Unlock's ctx already
// cancelled, and over many names.
// Origin: the adversarial review of Unlock returning at the majority (settle.go).
func TestSettlingEntriesAreDropped(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var held []*redlock.Lock
	for _, n := range names {
		l, err := c.TryLock(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	resume := cl.pause(t, 2)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for i, l := range held {
		uctx := ctx
		if i%2 == 1 {
			uctx = cancelled
		}
		err := l.Unlock(uctx)
		t.Logf("%s: %v", l.Name(), err)
	}
	if n := redlock.SettlingLen(c); n == 0 {
		t.Fatalf("no release in flight with node 2 paused")
	}
	c.Close()
	// The last calls to the paused node end about 5 s after Close here (measured alike
	// before and after the worker pool; it matches go-redis's 5 s dial timeout), and a
	// 6 s bound failed once in a loaded CI pass. Entries that were never dropped would
	// stay for good.
	deadline := time.Now().Add(12 * time.Second)
	for redlock.SettlingLen(c) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d names still settling 12 s after Close, node 2 still paused", redlock.SettlingLen(c))
		}
		time.Sleep(50 * time.Millisecond)
	}
	resume()
	if !redlock.WaitAbandoned(c, 5*time.Second) {
		t.Fatal("client goroutines still running")
	}
}

// A refusal is this client's own old value if a release or rollback of
// the name was being retried on that node when the attempt's call went
// out, even if the retry has got through by the time the attempt is
// decided. Client B holds the name on nodes 0-2; client A's TryLock wins
// 3 and 4 and is lost, and its rollback's first try there fails (a link
// error: retried a node timeout later). B unlocks; A tries again at once:
// 1 and 2 grant, 3 and 4 refuse (A's old value), and node 0 is slow, so
// the round waits for it a node timeout, during which the rollback's
// retry gets through. Before the fix the attempt looked for retries only
// when it was decided, found none, and said ErrLocked, "held by another
// owner [2 granted, 2 refused, 1 timed out of 5]", on a name nobody held.
// Origin: CI (TestLoadOwnNames, fenced, 256 goroutines on a loaded machine).
func TestARefusalWhileItsRollbackWasRetriedIsTheClientsOwn(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			cl := startCluster(t, 5)
			const nodeTimeout = 300 * time.Millisecond
			opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeout), redlock.WithTTL(20 * time.Second)}
			acquire := "acquire"
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
				acquire = "acquire-unfenced"
			}
			ctx := context.Background()
			name := "own-retry-" + acquire
			b := cl.actor(t, []*faultHook{nil, nil, nil, cut(), cut()}, opts...)
			lb, err := b.TryLock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			var failRelease [5]atomic.Bool
			var slowAcquire atomic.Bool
			var retried [2]sync.Once
			retriedThrough := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
			hooks := make([]*faultHook, 5)
			for i := range hooks {
				hooks[i] = &faultHook{before: func(s string) error {
					if s == "release" && failRelease[i].CompareAndSwap(true, false) {
						return errLinkCut
					}
					if i == 0 && s == acquire && slowAcquire.Load() {
						time.Sleep(2 * nodeTimeout)
					}
					return nil
				}, after: func(s string) {
					switch {
					case s == "release" && i >= 3:
						retried[i-3].Do(func() { close(retriedThrough[i-3]) })
					case s == acquire && i >= 3 && slowAcquire.Load():
						// The refusal reaches the client once the retry
						// is through.
						select {
						case <-retriedThrough[i-3]:
							time.Sleep(20 * time.Millisecond)
						case <-time.After(3 * nodeTimeout):
						}
					}
				}}
			}
			// Without batching, so that the retry's call does not wait
			// for the held reply's batch on its link.
			a := cl.actor(t, hooks, append(opts, redlock.WithoutBatching())...)
			failRelease[3].Store(true)
			failRelease[4].Store(true)
			if _, err := a.TryLock(ctx, name); !errors.Is(err, redlock.ErrLocked) {
				t.Fatalf("A's first TryLock, B holding 0-2: %v, want ErrLocked", err)
			}
			// Lost at the majority's refusals, it may return before 3
			// and 4 answered; their rollback follows their calls.
			for deadline := time.Now().Add(2 * time.Second); failRelease[3].Load() || failRelease[4].Load(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("A's rollback was not tried on nodes 3 and 4: nothing is replayed")
				}
			}
			if err := lb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(nodeTimeout / 3)
			slowAcquire.Store(true)
			l, err := a.TryLock(ctx, name)
			slowAcquire.Store(false)
			if err == nil {
				l.Unlock(ctx)
				t.Fatal("A's second TryLock won: the rollback's retry was through before it, nothing is replayed")
			}
			t.Logf("A's second TryLock: %v", err)
			if errors.Is(err, redlock.ErrLocked) {
				t.Fatalf("A's second TryLock on a name nobody holds: %v", err)
			}
			if !errors.Is(err, redlock.ErrUnavailable) {
				t.Fatalf("A's second TryLock: %v, want ErrUnavailable", err)
			}
		})
	}
}

// A refusal is no evidence of this client's own old value where the
// retry of its rollback got through before the attempt's call went out
// there: the node had applied it. (The snapshot of retries taken when the
// attempt began, in the first version of the fix above, counted them
// anyway, and said ErrUnavailable where B held the lock.) B holds the name
// on nodes 0-2. A's TryLock is refused on 0, and its calls to 1 and 2 are
// held on the wire past the node timeout (unsent), so they are rolled
// back, unsure; the rollback's first try there times out the same way, so
// it is retried a node timeout later, and afterOwn holds the next
// attempt's calls on 1 and 2 until that retry's try. A tries again once
// the retries are registered: node 0 refuses at once, the calls to 1 and 2
// go out after the retries got through, and are refused by B: ErrLocked.
// Origin: the adversarial review of the own-refusal fix (stop 47).
func TestARetryThatGotThroughBeforeTheCallIsNoOwnValue(t *testing.T) {
	cl := startCluster(t, 3)
	const nodeTimeout = 300 * time.Millisecond
	opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeout), redlock.WithTTL(20 * time.Second)}
	ctx := context.Background()
	const name = "retry-through-before"
	b := cl.actor(t, []*faultHook{nil, nil, nil}, opts...)
	lb, err := b.TryLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Unlock(ctx)
	var stallAcquire, stallRelease [3]atomic.Bool
	var stalled [3]chan struct{}
	var retriedThrough [3]atomic.Bool
	hooks := make([]*faultHook, 3)
	for i := range hooks {
		stalled[i] = make(chan struct{})
		hooks[i] = &faultHook{before: func(s string) error {
			switch {
			case s == "acquire" && stallAcquire[i].CompareAndSwap(true, false):
				time.Sleep(3 * nodeTimeout / 2)
				return context.DeadlineExceeded // timed out, unsent
			case s == "release" && stallRelease[i].CompareAndSwap(true, false):
				time.Sleep(3 * nodeTimeout / 2)
				defer close(stalled[i])
				return context.DeadlineExceeded
			}
			return nil
		}, after: func(s string) {
			if s == "release" && (i == 1 || i == 2) {
				retriedThrough[i].Store(true)
			}
		}}
	}
	a := cl.actor(t, hooks, append(opts, redlock.WithoutBatching())...)
	for _, i := range []int{1, 2} {
		stallAcquire[i].Store(true)
		stallRelease[i].Store(true)
	}
	if _, err := a.TryLock(ctx, name); err == nil {
		t.Fatal("A's first TryLock won while B holds every node")
	}
	for _, i := range []int{1, 2} {
		select {
		case <-stalled[i]:
		case <-time.After(10 * nodeTimeout):
			t.Fatalf("no rollback was tried on node %d: nothing is replayed", i)
		}
	}
	time.Sleep(nodeTimeout / 6) // the retries are registered; their first try is ~250 ms away
	if retriedThrough[1].Load() || retriedThrough[2].Load() {
		t.Fatal("a retry got through before the second attempt began: nothing is replayed")
	}
	l, err := a.TryLock(ctx, name)
	if err == nil {
		l.Unlock(ctx)
		t.Fatal("A's second TryLock won while B holds the lock")
	}
	t.Logf("A's second TryLock: %v", err)
	// Decided at the majority's refusals, it may not wait for the third
	// node; a refusal from node 1 or 2 (sent after its retry got through:
	// afterOwn) is what replays the trap.
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Nodes[1].Outcome != redlock.NodeRefused && qe.Nodes[2].Outcome != redlock.NodeRefused {
		t.Fatalf("neither node 1 nor node 2 refused: nothing is replayed (%v)", err)
	}
	if !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("A's second TryLock, its calls on nodes 1 and 2 sent after its rollback's retries got through "+
			"there, B holding all 3 nodes: %v, want ErrLocked", err)
	}
}

// The settling state is kept by lease name, and a read-write lock and the
// mutex of the same name share it (both use Request.Name = name), though
// they are different keys on the nodes (docs/rwlock.md: "another lock than
// the mutex of the same name"). A's RWMutex("x") Unlock fails on nodes 1
// and 2 (a link error: retried a node timeout later); B takes the MUTEX
// "x" on every node; A's TryLock of the mutex "x" is refused by B on all
// three nodes, yet says ErrUnavailable: its RW release's retries, which
// touch another key, are taken for its own old value on the mutex key.
// Fixed: a read-write lock's releases are kept under lease.RWSettleName.
// Origin: the adversarial review of the own-refusal fix (stop 47); it failed before that fix too.
func TestAReadWriteLocksReleaseRetryIsNotTheMutexsOwnValue(t *testing.T) {
	const name = "rw-retry-shared"
	err := rwReleaseRetriedThenMutex(t, name, name)
	if !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("A's TryLock of the mutex %q, held by B on all 3 nodes: %v, want ErrLocked", name, err)
	}
}

// Control for TestAReadWriteLocksReleaseRetryIsNotTheMutexsOwnValue: the same
// with the RW lock under another name says ErrLocked.
// Origin: the adversarial review of the own-refusal fix (stop 47).
func TestAReadWriteLocksReleaseRetryControl(t *testing.T) {
	err := rwReleaseRetriedThenMutex(t, "rw-retry-control-other", "rw-retry-control")
	if !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("control: %v, want ErrLocked", err)
	}
}

// rwReleaseRetriedThenMutex: client A holds the read-write lock rwName and
// its Unlock fails on nodes 1 and 2 (a link error: retried a node timeout
// later); client B takes the mutex mutexName on every node; it returns A's
// TryLock of that mutex.
func rwReleaseRetriedThenMutex(t *testing.T, rwName, mutexName string) error {
	t.Helper()
	cl := startCluster(t, 3)
	opts := []redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond)}
	ctx := context.Background()
	var failRelease [3]atomic.Bool
	hooks := make([]*faultHook, 3)
	for i := range hooks {
		hooks[i] = &faultHook{before: func(s string) error {
			if s == "rw-release" && failRelease[i].CompareAndSwap(true, false) {
				return errLinkCut
			}
			return nil
		}}
	}
	a := cl.actor(t, hooks, append(opts, redlock.WithoutBatching())...)
	b := cl.actor(t, []*faultHook{nil, nil, nil}, opts...)
	rw, err := a.RWMutex(rwName)
	if err != nil {
		t.Fatal(err)
	}
	w, err := rw.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failRelease[1].Store(true)
	failRelease[2].Store(true)
	t.Logf("A's RW Unlock, failing on nodes 1 and 2: %v", w.Unlock(ctx))
	lb, err := b.TryLock(ctx, mutexName) // the mutex: another key than the RW lock's
	if err != nil {
		t.Fatalf("B's TryLock of the mutex %q: %v", mutexName, err)
	}
	t.Cleanup(func() { lb.Unlock(ctx) })
	l, err := a.TryLock(ctx, mutexName)
	if err == nil {
		l.Unlock(ctx)
		t.Fatal("A's TryLock won while B holds the mutex")
	}
	t.Logf("A's TryLock of the mutex held by B: %v", err)
	return err
}
