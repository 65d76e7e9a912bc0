package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The multi-lock at its edges: cluster clients as nodes, a late
// acquisition after a rollback, DoMulti's lost lock.

// Redis Cluster clients as the nodes of an unfenced client (which the
// mutex supports): a multi-lock's members span hash slots unless their
// names share a hash tag. The attempt must fail with an error that says
// so, not ErrFencingNode's "fencing needs standalone ... use
// WithoutFencing", which this client already does; and members that share
// a tag ("t}a", "t}b") are one slot and must work.
// Origin: the adversarial review of the multi-lock.
func TestMultiClusterClientsAsNodes(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
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

// A multi-lock's acquisition that lands on a node after its rollback there
// (a call that sat in a paused node's socket) takes no member: the rollback
// leaves a release marker for every member, not only the first. Node 2's
// acquisition is kept back (its outcome unknown to the client), node 1
// refuses (another owner holds "c"), the attempt fails and is rolled back;
// then the kept copy is delivered to node 2.
// Origin: the adversarial review of the multi-lock.
func TestMultiLateAcquisitionAfterRollbackTakesNoMember(t *testing.T) {
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
// Origin: the adversarial review of the multi-lock.
func TestDoMultiLostLockContext(t *testing.T) {
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
