package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Round 2 of a mutex's fenced acquisition asks the majority of the nodes
// that granted round 1 and answered it soonest, and the others only if
// those cannot make a majority (docs/fencing.md, step 2).

// committedOn is the nodes that hold an H for name.
func (cl *cluster) committedOn(t *testing.T, name string) []int {
	t.Helper()
	var on []int
	for i, in := range cl.inspect {
		err := in.Get(context.Background(), "redlock:{"+name+"}:fence:high").Err()
		switch {
		case err == nil:
			on = append(on, i)
		case !errors.Is(err, redis.Nil):
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return on
}

// A healthy deployment of five: the commit goes to three nodes, and the
// observer says the other two were not needed (NodeNoReply), not hung.
// Before, it went to all five.
func TestTheCommitGoesToAMajority(t *testing.T) {
	cl := startCluster(t, 5)
	var mu sync.Mutex
	var commit []redlock.NodeResult
	// A generous node timeout: a node late on a loaded machine would
	// widen the commit, and this test is about the healthy case.
	c := cl.newClient(t, redlock.WithNodeTimeout(2*time.Second), redlock.WithObserver(redlock.ObserverFunc(func(_ context.Context, ev redlock.Event) {
		if ev.Op == "lock" && ev.Err == nil {
			mu.Lock()
			commit = ev.Commit
			mu.Unlock()
		}
	})))
	ctx := context.Background()
	for _, name := range []string{"m1", "m2", "m3"} {
		l, err := c.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if on := cl.committedOn(t, name); len(on) != 3 {
			t.Errorf("%s: H on nodes %v, want on three", name, on)
		}
		mu.Lock()
		got := map[redlock.Outcome]int{}
		for _, r := range commit {
			got[r.Outcome]++
			if r.Outcome == redlock.NodeNoReply && r.Err != nil {
				t.Errorf("%s: node %d not asked, yet with an error: %v", name, r.Node, r.Err)
			}
		}
		mu.Unlock()
		if got[redlock.NodeGranted] != 3 || got[redlock.NodeNoReply] != 2 {
			t.Errorf("%s: the observer's commit outcomes %v, want 3 granted and 2 no reply", name, got)
		}
	}
}

// A node that granted round 1 and fails round 2, or is silent in it:
// the commit asked it among the first, and widens to the node it did not
// ask. The lock is granted with its validity intact: a silent node was
// given up on at the node timeout, not after the round's patience (which,
// here, is the whole TTL). Each node in turn, so that the lost node was
// one of the first asked.
func TestTheCommitWidensPastANodeLostAfterRoundOne(t *testing.T) {
	for _, silent := range []bool{false, true} {
		for lost := range 3 {
			cl := startCluster(t, 3)
			release := make(chan struct{})
			hooks := make([]*faultHook, 3)
			hooks[lost] = &faultHook{before: func(script string) error {
				switch {
				case script != "commit":
					return nil
				case silent:
					select { // the link hangs, for longer than the TTL
					case <-release:
					case <-time.After(4 * time.Second):
					}
					return nil
				default:
					return errLinkCut
				}
			}}
			c := cl.actor(t, hooks, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
			start := time.Now()
			l, err := c.TryLock(context.Background(), "w")
			close(release)
			if err != nil {
				t.Fatalf("silent=%v, node %d lost after round 1: %v", silent, lost, err)
			}
			if v := l.Until().Sub(start); v < 1500*time.Millisecond {
				t.Errorf("silent=%v, node %d lost after round 1: %v of validity, want most of the 3s TTL", silent, lost, v)
			}
			for _, i := range cl.committedOn(t, "w") {
				if i == lost && !silent {
					t.Errorf("H on node %d, whose commit failed", lost)
				}
			}
			if on := cl.committedOn(t, "w"); len(on) < 2 {
				t.Errorf("silent=%v, node %d lost: H on %v, want a majority", silent, lost, on)
			}
			_ = l.Unlock(context.Background())
		}
	}
}
