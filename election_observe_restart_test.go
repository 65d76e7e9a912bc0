package redlock_test

import (
	"context"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Observe after a node restart and a missed notification (issue 36). Two
// observers follow one election: one polls at its usual period, the other
// only hourly, so that what it sees came by notification. Node 0 restarts
// empty; then every node's subscriber connections are killed, and the
// polling observer cannot dial again, so it misses the handover's
// announcement for certain: it shows the new leader at its next poll all
// the same. The listening observer's subscriptions come back, on the
// restarted node too, and it hears the handover after that.
func TestObserveRecoversFromARestartAndAMissedNotification(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := []redlock.Option{redlock.WithTTL(2 * time.Second), redlock.WithNodeTimeout(300 * time.Millisecond)}

	var dialsRefused atomic.Bool
	var gated []redis.UniversalClient
	for _, n := range cl.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dialsRefused.Load() {
				return nil, &net.OpError{Op: "dial", Net: network, Err: net.ErrClosed}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}})
		t.Cleanup(func() { rc.Close() })
		gated = append(gated, rc)
	}
	pollingClient, err := redlock.New(gated, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pollingClient.Close() })
	polling := must(pollingClient.Election("observed"))(t).Observe(ctx)
	redlock.StretchObservePoll(t) // the observers started from here on poll hourly
	listening := must(cl.newClient(t, opts...).Election("observed"))(t).Observe(ctx)
	next := func(who string, seen <-chan redlock.LeaderInfo, want string, within time.Duration) redlock.LeaderInfo {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case info := <-seen:
				if info.Value == want {
					return info
				}
			case <-deadline:
				t.Fatalf("the %s observer was not told of %q within %v", who, want, within)
			}
		}
	}
	campaign := func(value string) *redlock.Leadership {
		t.Helper()
		ld, err := must(cl.newClient(t, opts...).Election("observed"))(t).Campaign(ctx, value)
		if err != nil {
			t.Fatal(err)
		}
		return ld
	}
	subscribers := func() []int64 {
		var out []int64
		for i, in := range cl.inspect {
			n, err := in.PubSubNumSub(ctx, "redlock:{observed}:released").Result()
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			out = append(out, n["redlock:{observed}:released"])
		}
		return out
	}
	settle := func(want []int64) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !slices.Equal(subscribers(), want); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("subscribers per node %v, want %v", subscribers(), want)
			}
		}
	}

	settle([]int64{2, 2, 2}) // both observers subscribed everywhere
	one := campaign("one")
	next("polling", polling, "one", 10*time.Second)
	next("listening", listening, "one", 10*time.Second)

	cl.restartEmpty(t, 0)
	settle([]int64{2, 2, 2}) // both resubscribed on the restarted node

	dialsRefused.Store(true)
	for i, in := range cl.inspect {
		if err := in.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	settle([]int64{1, 1, 1}) // the listening observer is back; the polling one cannot dial
	if err := one.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	two := campaign("two")
	// The announcement went out while the polling observer had no
	// subscription anywhere: its poll (ObservePoll(2 s) = 200 ms) shows it.
	got := next("polling", polling, "two", 10*time.Second)
	if got.Term <= one.Term() || got.Term != two.Term() {
		t.Errorf("the polling observer was told of term %d for the leader of term %d, after term %d", got.Term, two.Term(), one.Term())
	}
	next("listening", listening, "two", 10*time.Second)

	if err := two.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	three := campaign("three")
	if got := next("listening", listening, "three", 10*time.Second); got.Term != three.Term() {
		t.Errorf("the listening observer was told of term %d for the leader of term %d", got.Term, three.Term())
	}
	_ = three.Resign(ctx)
}
