package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// delayScripts holds back, while armed, every call of the named scripts by d
// on one wire.
func delayScripts(armed *atomic.Bool, d time.Duration, scripts ...string) *faultHook {
	return &faultHook{before: func(s string) error {
		if armed.Load() {
			for _, name := range scripts {
				if s == name {
					time.Sleep(d)
				}
			}
		}
		return nil
	}}
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
func TestReviewMultiOwnReleaseInFlightAcrossPrimitives(t *testing.T) {
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

// LockMulti gives up at once on the errors Lock gives up on: a member that
// is not a string is ErrWrongType, however the other members stand. With
// "a" held by another owner and "b" a list on every node, the node script
// returns 0 at "a" before it looks at "b", so LockMulti waits on as if "a"
// were merely contended, until ctx ends.
func TestReviewMultiWrongTypeMemberBehindAHeldOne(t *testing.T) {
	cl := startCluster(t, 3)
	cl.holdAsStranger(t, "wt-a", 0, 1, 2)
	for i := range cl.inspect {
		if err := cl.inspect[i].RPush(context.Background(), "redlock:{wt-b}", "x").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			var opts []redlock.Option
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
			}
			c := cl.newClient(t, append(opts, redlock.WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.LockMulti(ctx, []string{"wt-a", "wt-b"})
			if !errors.Is(err, redlock.ErrWrongType) {
				t.Fatalf("LockMulti over a held member and a list: %v after %v, want ErrWrongType at once", err, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// Redis Cluster clients as the nodes of an unfenced client (which the
// mutex supports): a multi-lock's members span hash slots unless their
// names share a hash tag. The attempt must fail with an error that says
// so, not ErrFencingNode's "fencing needs standalone ... use
// WithoutFencing", which this client already does; and members that share
// a tag ("t}a", "t}b") are one slot and must work.
func TestReviewMultiClusterClientsAsNodes(t *testing.T) {
	nodes := startClusterModeNodes(t, 3)
	c, err := redlock.New(nodes, redlock.WithoutFencing(), redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	m, err := c.TryLockMulti(ctx, []string{"t}a", "t}b"})
	if err != nil {
		t.Fatalf("members sharing a hash tag: %v", err)
	}
	if err := m.Extend(ctx); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = c.LockMulti(lctx, []string{"a", "b"})
	t.Logf("LockMulti over two slots: %v", err)
	if err == nil {
		t.Fatal("LockMulti over two slots succeeded")
	}
	if strings.Contains(err.Error(), "WithoutFencing") {
		t.Errorf("an unfenced client is told to use WithoutFencing: %v", err)
	}
	if !strings.Contains(err.Error(), "slot") {
		t.Errorf("the error does not say the members span hash slots: %v", err)
	}
}

// Close while LockMulti waits on a held member: ErrClosed, promptly.
func TestReviewMultiCloseWhileLockMultiWaits(t *testing.T) {
	cl := startCluster(t, 3)
	cl.holdAsStranger(t, "cw-b", 0, 1, 2)
	c, err := redlock.New(cl.clients, redlock.WithRetryDelay(2*time.Second, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.LockMulti(context.Background(), []string{"cw-a", "cw-b"})
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	c.Close()
	select {
	case err := <-got:
		if !errors.Is(err, redlock.ErrClosed) {
			t.Errorf("LockMulti after Close: %v, want ErrClosed", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("LockMulti returned %v after Close", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LockMulti still waiting 5 s after Close")
	}
}

// captureHook fails, while armed, the named script's call without sending
// it (the link cut), and keeps its arguments: the copy of a call that sat
// in a socket, to be delivered by hand after the rollback.
type captureHook struct {
	script string
	armed  *atomic.Bool
	got    chan []any
}

func (h captureHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h captureHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h captureHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() && redlock.ScriptName(cmd.Args()) == h.script {
			select {
			case h.got <- append([]any(nil), cmd.Args()...):
			default:
			}
			cmd.SetErr(errLinkCut)
			return errLinkCut
		}
		return next(ctx, cmd)
	}
}

// A multi-lock's acquisition that lands on a node after its rollback there
// (a call that sat in a paused node's socket) takes no member: the rollback
// leaves a release marker for every member, not only the first. Node 2's
// acquisition is kept back (its outcome unknown to the client), node 1
// refuses (another owner holds "c"), the attempt fails and is rolled back;
// then the kept copy is delivered to node 2.
func TestReviewMultiLateAcquisitionAfterRollbackTakesNoMember(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "unfenced"}[fenced], func(t *testing.T) {
			cl := startCluster(t, 3)
			var armed atomic.Bool
			capture := captureHook{script: "multi-acquire", armed: &armed, got: make(chan []any, 1)}
			var opts []redlock.Option
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
			}
			c := cl.hookedOn(t, map[int]redis.Hook{2: capture}, opts...)
			ctx := context.Background()
			// Load the scripts on every node first, so that the kept
			// EVALSHA runs when delivered.
			m, err := c.TryLockMulti(ctx, []string{"late-a", "late-b", "late-c"})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			cl.holdersOnceReleased(t, "late-c")
			cl.holdAsStranger(t, "late-c", 1)
			armed.Store(true)
			if _, err := c.TryLockMulti(ctx, []string{"late-a", "late-b", "late-c"}); err == nil {
				t.Fatal("TryLockMulti won with node 1 refusing and node 2 cut")
			}
			armed.Store(false)
			args := <-capture.got
			// The rollback reaches node 2 (the link is up again).
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				n, _ := cl.inspect[2].Keys(ctx, "redlock:{late-*}:released:*").Result()
				if len(n) == 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("release markers on node 2: %v, want one per member", n)
				}
			}
			reply, err := cl.inspect[2].Do(ctx, args...).Result()
			t.Logf("the late acquisition's reply: %v, %v", reply, err)
			for _, name := range []string{"late-a", "late-b", "late-c"} {
				if v := cl.holders(t, name)[2]; v != "" {
					t.Errorf("%s held on node 2 after the late acquisition: %q", name, v)
				}
			}
		})
	}
}

// DoMulti's fn context ends with ErrLockLost when the set cannot be kept:
// one member gone on a majority fails the watchdog's extension.
func TestReviewMultiDoMultiLostLockContext(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(300*time.Millisecond))
	ctx := context.Background()
	err := c.DoMulti(ctx, []string{"lost-a", "lost-b"}, func(ctx context.Context, m *redlock.MultiLock) error {
		for _, i := range []int{0, 1} {
			cl.inspect[i].Del(context.Background(), "redlock:{lost-b}")
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(2 * time.Second):
			return errors.New("fn's context still alive 2 s after a member was lost")
		}
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("DoMulti with a member lost: %v, want ErrLockLost", err)
	}
	if got := cl.holdersOnceReleased(t, "lost-a"); strings.Join(got, "") != "" {
		t.Errorf("lost-a held after DoMulti: %q", got)
	}
}

// Every primitive comes with the mutex's fair waiting, woken by
// notifications (lock-family.md, "What each primitive must come with").
// When LockMulti did not queue, while two Locks of "a" took turns, each
// Unlock promised "a" to the other, always queued by then, so "a" was never
// free and unpromised when LockMulti's polls landed, and LockMulti waited
// for ever though it asked long before most of the turns (skipped as a
// known limitation until LockMulti joined its members' queues).
func TestReviewMultiLockMultiStarvedByMemberWaiters(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var turns atomic.Int64
	for range 2 {
		c := cl.newClient(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := c.Lock(ctx, "starve-a")
				if err != nil {
					continue
				}
				turns.Add(1)
				time.Sleep(20 * time.Millisecond)
				_ = l.Unlock(context.Background())
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	m := cl.newClient(t)
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	defer wcancel()
	before := turns.Load()
	ml, err := m.LockMulti(wctx, []string{"starve-a", "starve-b"})
	after := turns.Load()
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("LockMulti waited through %d turns of two Locks of a member and got nothing: %v", after-before, err)
	}
	_ = ml.Unlock(context.Background())
}

// Counterexample 3 (fencing.md) across primitives: B's round 1 reaches n1
// before A's commit there and n2 only after A unlocked; A commits on
// {n0, n1}. B must then abort in round 2 (ErrSuperseded) or hold a token
// above A's: the multi-lock's commit checks every member's H, not only the
// first, and commits H for every member, so a mutex of the second member
// sees it.
func TestReviewMultiCounterexample3AcrossPrimitives(t *testing.T) {
	for _, tc := range []struct {
		name         string
		aNames       []string // A: one name is a mutex
		bNames       []string
		bAcquire     string
		aCommitCutN2 string
	}{
		{"mutex A, multi B", []string{"ce-b"}, []string{"ce-a", "ce-b"}, "multi-acquire", "commit"},
		{"multi A, mutex B", []string{"ce-b", "ce-c"}, []string{"ce-b"}, "acquire", "multi-commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startCluster(t, 3)
			cl.withCounter(t, 0, 7)
			opts := []redlock.Option{redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(10 * time.Second)}
			ctx := context.Background()
			bReachedN1 := make(chan struct{})
			releaseN2 := make(chan struct{})
			var once sync.Once
			b := cl.actor(t, []*faultHook{
				cut(),
				{after: func(s string) {
					if s == tc.bAcquire {
						once.Do(func() { close(bReachedN1) })
					}
				}},
				{before: func(s string) error {
					if s == tc.bAcquire {
						<-releaseN2
					}
					return nil
				}},
			}, opts...)
			a := cl.actor(t, []*faultHook{nil, nil, cutScript(tc.aCommitCutN2)}, opts...)
			type res struct {
				token uint64
				err   error
			}
			lock := func(c *redlock.Client, names []string) (uint64, func(context.Context) error, error) {
				if len(names) == 1 {
					l, err := c.TryLock(ctx, names[0])
					if err != nil {
						return 0, nil, err
					}
					return l.Token(), l.Unlock, nil
				}
				m, err := c.TryLockMulti(ctx, names)
				if err != nil {
					return 0, nil, err
				}
				return m.Token(), m.Unlock, nil
			}
			bDone := make(chan res, 1)
			go func() {
				tok, unlock, err := lock(b, tc.bNames)
				if err == nil {
					defer unlock(ctx)
				}
				bDone <- res{tok, err}
			}()
			<-bReachedN1
			ta, unlock, err := lock(a, tc.aNames)
			if err != nil {
				close(releaseN2)
				t.Fatalf("A: %v", err)
			}
			if err := unlock(ctx); err != nil {
				close(releaseN2)
				t.Fatalf("A unlock: %v", err)
			}
			close(releaseN2)
			rb := <-bDone
			t.Logf("A committed %d and unlocked; B: token %d, %v", ta, rb.token, rb.err)
			if rb.err == nil && rb.token <= ta {
				t.Fatalf("B granted with %d after A's %d was committed", rb.token, ta)
			}
			if rb.err != nil && !errors.Is(rb.err, redlock.ErrSuperseded) {
				t.Errorf("B failed with %v, want ErrSuperseded", rb.err)
			}
		})
	}
}
