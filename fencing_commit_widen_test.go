package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// The second send of a mutex's commit (Lease.widen), replays of the third
// review of the majority commit.

// The lock's clock (WithClock) a minute behind the machine's: whether the
// attempt is still valid is asked of the lock's clock, not of time.Now.
// Compared with time.Now, the validity had always passed, and the commit
// never widened past a node whose commit failed (d9be6a4).
func TestTheCommitWidensByTheLocksClock(t *testing.T) {
	for lost := range 3 {
		cl := startCluster(t, 3)
		hooks := make([]*faultHook, 3)
		hooks[lost] = cutScript("commit")
		behind := &redlock.StepClock{}
		behind.Jump(-time.Minute)
		c := cl.actor(t, hooks, redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(200*time.Millisecond),
			redlock.WithClock(behind))
		l, err := c.TryLock(context.Background(), "cb")
		if err != nil {
			t.Fatalf("node %d's commit cut, the lock's clock behind: %v", lost, err)
		}
		_ = l.Unlock(context.Background())
	}
}

// Five nodes; of the three asked first node 0 commits, node 1's commit
// fails, node 2 is silent; nodes 3 and 4, not asked, commit 300 ms late
// (node timeout 200 ms). The second send waits for answers from distinct
// nodes, as the old round did: node 1 is not asked again, so its second
// failure cannot end the wait before nodes 3 and 4 have answered (d9be6a4
// gave them up at the node timeout and failed).
func TestTheSecondSendCountsEachNodeOnce(t *testing.T) {
	cl := startCluster(t, 5)
	release := make(chan struct{})
	defer close(release)
	slow := both(delayScript(30*time.Millisecond, "acquire"), delayScript(300*time.Millisecond, "commit"))
	hooks := []*faultHook{nil, cutScript("commit"), hangScript(5*time.Second, "commit", release), slow, slow}
	c := cl.actor(t, hooks, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	l, err := c.TryLock(context.Background(), "dc")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(context.Background())
}

// H turned into a list on every node between the rounds: the commit fails
// on every node with WRONGTYPE, and says ErrWrongType (naming the key), as
// round 1 does, not ErrUnavailable (the third review's replay; the same
// before the majority commit).
func TestACommitOnAKeyOfAnotherTypeIsErrWrongType(t *testing.T) {
	cl := startCluster(t, 5)
	const h = "redlock:{wt-commit}:fence:high"
	c := cl.newClient(t, redlock.WithTrace(&redlock.Trace{RoundTwo: func(string, uint64) {
		for i, in := range cl.inspect {
			ctx := context.Background()
			if err := in.Del(ctx, h).Err(); err != nil {
				t.Errorf("node %d: %v", i, err)
			}
			if err := in.LPush(ctx, h, "x").Err(); err != nil {
				t.Errorf("node %d: %v", i, err)
			}
		}
	}}))
	l, err := c.TryLock(context.Background(), "wt-commit")
	if err == nil {
		_ = l.Unlock(context.Background())
		t.Fatal("locked with a list under H on every node")
	}
	var we *redlock.WrongTypeError
	if !errors.Is(err, redlock.ErrWrongType) || !errors.As(err, &we) || we.Key != h {
		t.Fatalf("want ErrWrongType naming %s, got %v", h, err)
	}
}
