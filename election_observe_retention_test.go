package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Found by an adversarial review (fixed: extensions renew H; Observe takes a
// new value of the same leadership whatever its term reads): a leadership's term is read from the name's H, which
// expires one retention after its commit, and the keep-alive never renews
// it. Once a leader has led longer than the retention, Leader reports
// Term 0, and Observe, which sends only terms that do not go down
// (info.Term >= last.Term), skips every later Proclaim of that leader
// for the rest of its leadership: the change is missed, not delayed.
// (Default retention 24 h: a leader that proclaims after a day.)
func TestObserveHearsTheProclaimsOfALeaderOlderThanTheRetention(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(50 * time.Millisecond),
		redlock.WithRetention(2500 * time.Millisecond)}
	e := must(cl.newClient(t, opts...).Election("old"))(t)
	watcher := must(cl.newClient(t, opts...).Election("old"))(t)
	seen := watcher.Observe(ctx)
	ld, err := e.Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(context.Background())
	next := func(want string, within time.Duration) (redlock.LeaderInfo, bool) {
		deadline := time.After(within)
		for {
			select {
			case info := <-seen:
				if info.Value == want {
					return info, true
				}
			case <-deadline:
				return redlock.LeaderInfo{}, false
			}
		}
	}
	first, ok := next("v1", 5*time.Second)
	if !ok {
		t.Fatal("no v1")
	}
	time.Sleep(3500 * time.Millisecond) // the leader leads past the retention
	if err := ld.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := next("v2", 3*time.Second); !ok {
		info, err := watcher.Leader(ctx)
		t.Fatalf("the observer never saw the leader's v2 (first term %d, Leader now: %+v, %v; the leader's Term() %d)",
			first.Term, info, err, ld.Term())
	}
}
