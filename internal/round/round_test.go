package round

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A round that the caller's ctx cut short returns ctx's error and blames
// no node, even when the calls ctx ended came back before collect saw ctx
// end and, leaving too few nodes to win, decided the round: the semaphore's
// commit said ErrUnavailable ("3 failed of 5: context canceled") for 1
// cancelled Acquire in 50 on a busy CI machine.
func TestRoundCutByCallersContextBlamesNoNode(t *testing.T) {
	nodes := make([]redis.UniversalClient, 5)
	for i := range nodes {
		rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		defer rc.Close()
		nodes[i] = rc
	}
	e := New(nodes, Config{NodeTimeout: time.Second, Patience: 2 * time.Second})
	defer func() { e.Close(); e.Wait() }()
	// Node 0 grants at once; nodes 1-3 are where the caller cancels (as a
	// go-redis call sees ctx end) and answer with ctx's error at once, so
	// their replies race collect's view of ctx; node 4 answers later.
	type cancelKey struct{}
	op := func(ctx context.Context, i int, _ redis.UniversalClient) (Outcome, int64, error) {
		switch i {
		case 0:
			return NodeGranted, 1, nil
		case 4:
			<-ctx.Done()
			time.Sleep(5 * time.Millisecond)
			return NodeGranted, 1, nil
		}
		ctx.Value(cancelKey{}).(context.CancelFunc)()
		return NodeFailed, 0, ctx.Err()
	}
	for try := range 2000 {
		ctx, cancel := context.WithCancel(context.Background())
		ctx = context.WithValue(ctx, cancelKey{}, cancel)
		tally, err := e.Run(ctx, Spec{Name: "commit", Op: op}, func(t *Tally) bool { return t.Decided() }, nil)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("try %d: Run returned %v, want ctx's error; nodes %v", try, err, tally.Results)
		}
		for _, r := range tally.Results {
			if r.Outcome == NodeFailed {
				t.Fatalf("try %d: node %d failed (%v): ctx ended its call, the node did not fail", try, r.Node, r.Err)
			}
		}
	}
}
