package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// A candidate whose node list is not the deployment's is refused, as the
// mutex's client is (revision 3 of the fencing design), and at once: A
// leads over the five nodes with its keys gone from nodes 3 and 4, and B,
// over nodes 2-4, would find a free majority of its own three. B's
// Campaign and Run fail with ErrWrongNodeList, not after waiting in line;
// A still leads, and B is in office nowhere.
func TestACandidateWithAWrongNodeListIsRefused(t *testing.T) {
	d1 := startCluster(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := d1.newClient(t, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(500*time.Millisecond))
	ea := must(a.Election("sched"))(t)
	la, err := ea.Campaign(ctx, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	defer la.Resign(context.Background())
	va := d1.holders(t, "sched")[0]
	for _, i := range []int{3, 4} {
		if err := d1.inspect[i].Del(ctx, "redlock:{sched}").Err(); err != nil {
			t.Fatal(err)
		}
	}
	b := newOn(t, []redis.UniversalClient{hooked(t, d1.nodes[2].Addr(), nil), hooked(t, d1.nodes[3].Addr(), nil),
		hooked(t, d1.nodes[4].Addr(), nil)}, bOpts...)
	eb := must(b.Election("sched"))(t)

	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	start := time.Now()
	lb, err := eb.Campaign(bctx, "host-b")
	var nle *redlock.NodeListError
	if err == nil {
		t.Errorf("B was elected over a wrong node list with term %d while A leads with term %d", lb.Term(), la.Term())
		lb.Resign(ctx)
	} else if !errors.Is(err, redlock.ErrWrongNodeList) || !errors.As(err, &nle) {
		t.Errorf("B's Campaign: %v, want ErrWrongNodeList with a *NodeListError", err)
	} else if waited := time.Since(start); bctx.Err() != nil {
		t.Errorf("B's Campaign waited %v, until its context ended, for a configuration error", waited)
	}
	runErr := eb.Run(bctx, "host-b", func(context.Context, *redlock.Leadership) error {
		t.Error("B's Run ran its function over a wrong node list")
		return nil
	})
	if !errors.Is(runErr, redlock.ErrWrongNodeList) || bctx.Err() != nil {
		t.Errorf("B's Run: %v (its context: %v), want ErrWrongNodeList at once", runErr, bctx.Err())
	}

	info, err := ea.Leader(ctx)
	if err != nil || info.Value != "host-a" || info.Term != la.Term() {
		t.Errorf("after B's attempts the leader is %+v (%v), want host-a with term %d", info, err, la.Term())
	}
	b.Close() // waits for B's rollbacks
	if got, want := d1.holders(t, "sched"), []string{va, va, va, "", ""}; !slices.Equal(got, want) {
		t.Errorf("after B's attempts the nodes hold %q, want %q", got, want)
	}
}
