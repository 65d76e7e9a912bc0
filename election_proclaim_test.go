package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// isElectionScript names the election's scripts (ScriptName does not).
func isElectionScript(args []any, s interface {
	Hash() string
	Source() string
}) bool {
	if len(args) < 2 {
		return false
	}
	body, _ := args[1].(string)
	return (s.Hash() != "" && body == s.Hash()) || body == s.Source()
}

// A user's Proclaim that overlaps the keep-alive's re-publication of the
// value (found by the adversarial review of a58e905: the keep-alive then
// took a new, higher proclamation number for the old value, and Proclaim
// returned nil while Leader showed the old value for good). Here the
// user's calls are held until the keep-alive's have been answered.
func TestTheKeepAliveDoesNotUndoAProclaim(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	ttl := 3 * time.Second
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(200 * time.Millisecond),
		redlock.WithRetention(7 * time.Second)} // stale after 3.5 s; min is 2*TTL+2*nt+drift
	var armed atomic.Bool
	ca := cl.hookedOn(t, proclaimHooks(3, &armed), opts...)
	e, _ := ca.Election("sched")
	eo, _ := cl.newClient(t, opts...).Election("sched")
	ctx := context.Background()
	ld, err := e.Campaign(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	time.Sleep(3200 * time.Millisecond)
	armed.Store(true)
	start := time.Now()
	err = ld.Proclaim(ctx, "B")
	t.Logf("Proclaim(B) after %v: err=%v", time.Since(start).Round(time.Millisecond), err)
	info, lerr := eo.Leader(ctx)
	t.Logf("Leader: value=%q term=%d err=%v; ld.Value()=%q", info.Value, info.Term, lerr, ld.Value())
	if err == nil && (info.Value != "B" || ld.Value() != "B") {
		t.Errorf("Proclaim(B) returned nil but the published value is %q and ld.Value() is %q", info.Value, ld.Value())
	}
}
