package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Observe hears of a new leader and a new value when the nodes announce
// them, not at its next poll (issue 36): with the fallback poll stretched
// to an hour, a campaign, a Proclaim and a handover each reach an observer
// on another client within seconds.
func TestObserveHearsLeadershipChangesWithoutPolling(t *testing.T) {
	redlock.StretchObservePoll(t)
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e1 := must(cl.newClient(t).Election("observed"))(t)
	e2 := must(cl.newClient(t).Election("observed"))(t)
	watcher := must(cl.newClient(t).Election("observed"))(t)
	seen := watcher.Observe(ctx)
	next := func(want string) redlock.LeaderInfo {
		t.Helper()
		for {
			select {
			case info := <-seen:
				if info.Value == want {
					return info
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the observer did not hear of %q within 5 s (its poll is an hour)", want)
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // the observer's first reading: nobody leads
	ld, err := e1.Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	first := next("v1")
	if err := ld.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if info := next("v2"); info.Term != first.Term {
		t.Fatalf("a Proclaim changed the term: %d, then %d", first.Term, info.Term)
	}
	got := make(chan *redlock.Leadership, 1)
	go func() {
		l2, err := e2.Campaign(ctx, "v3")
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	time.Sleep(200 * time.Millisecond) // the second candidate waits in line
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if info := next("v3"); info.Term <= first.Term {
		t.Fatalf("the next leader's term %d is not above %d", info.Term, first.Term)
	}
	if l2 := <-got; l2 != nil {
		_ = l2.Resign(ctx)
	}
}
