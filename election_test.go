package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
)

// Issue 36: a fenced leader election. A candidate that campaigns while
// another leads waits; the leader's Resign hands over to it at once, with
// a greater term; Leader shows who leads with the published value, and
// Proclaim changes it without a new term.
func TestResignHandsTheLeadershipToTheNextCandidateWithAGreaterTerm(t *testing.T) {
	cl := startCluster(t, 5)
	opts := []redlock.Option{redlock.WithTTL(5 * time.Second), redlock.WithNodeTimeout(500 * time.Millisecond)}
	ea, _ := cl.newClient(t, opts...).Election("scheduler")
	eb, _ := cl.newClient(t, opts...).Election("scheduler")
	ctx := context.Background()
	if _, err := ea.Leader(ctx); !errors.Is(err, redlock.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	a, err := ea.Campaign(ctx, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	info, err := eb.Leader(ctx)
	if err != nil || info.Value != "host-a" || info.Term != a.Term() || info.ID != a.ID() || a.Term() == 0 || info.Remaining <= 0 {
		t.Fatalf("Leader while a leads: %+v, %v; want host-a, term %d", info, err, a.Term())
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	elected := make(chan *redlock.Leadership, 1)
	go func() {
		b, err := eb.Campaign(wctx, "host-b")
		if err != nil {
			t.Errorf("b's campaign: %v", err)
		}
		elected <- b
	}()
	cl.inQueue(t, "scheduler", 1)
	select {
	case <-elected:
		t.Fatal("b was elected while a leads")
	default:
	}
	if err := a.Proclaim(ctx, "host-a:2"); err != nil {
		t.Fatal(err)
	}
	if info, err := eb.Leader(ctx); err != nil || info.Value != "host-a:2" || info.Term != a.Term() {
		t.Errorf("after Proclaim: %+v, %v", info, err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(a.Context(ctx)), redlock.ErrResigned) {
		t.Errorf("a's context after Resign: %v", context.Cause(a.Context(ctx)))
	}
	b := <-elected
	if b == nil {
		t.FailNow()
	}
	defer b.Resign(ctx)
	if b.Term() <= a.Term() {
		t.Errorf("b's term %d, not above a's %d", b.Term(), a.Term())
	}
	if info, err := ea.Leader(ctx); err != nil || info.Value != "host-b" || info.Term != b.Term() || info.ID != b.ID() {
		t.Errorf("Leader after the handover: %+v, %v", info, err)
	}
	if err := a.Proclaim(ctx, "host-a:3"); !errors.Is(err, redlock.ErrNotLeader) {
		t.Errorf("a's Proclaim after Resign: %v, want ErrNotLeader", err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Errorf("a second Resign: %v", err)
	}
}

// The cilium overrun (issue 36): a leader that can no longer extend its
// lease (here every extension it sends fails) has its context ended before
// the lease can pass; the next candidate leads with a greater term once
// the lease has passed, and the deposed leader's late write under its old
// term is refused by the fence once the new leader has written.
func TestADeposedLeadersWorkStopsInTimeAndItsLateWriteIsRefused(t *testing.T) {
	cl := startCluster(t, 5)
	ttl := time.Second
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(200 * time.Millisecond)}
	var cut atomic.Bool
	hook := &faultHook{before: func(script string) error {
		if script == "extend" && cut.Load() {
			return errLinkCut
		}
		return nil
	}}
	ca := cl.actor(t, []*faultHook{hook, hook, hook, hook, hook}, opts...)
	ea, _ := ca.Election("controller")
	eb, _ := cl.newClient(t, opts...).Election("controller")
	ctx := context.Background()
	store := &fence.Memory{}

	a, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	actx := a.Context(ctx)
	if err := store.Do(ctx, "cidrs", a.Term(), a.ID(), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	cut.Store(true)
	elected := make(chan *redlock.Leadership, 1)
	go func() {
		b, err := eb.Campaign(ctx, "b")
		if err != nil {
			t.Errorf("b's campaign: %v", err)
		}
		elected <- b
	}()
	<-actx.Done()
	if !errors.Is(context.Cause(actx), redlock.ErrLockLost) {
		t.Errorf("a's context ended with %v, want ErrLockLost", context.Cause(actx))
	}
	b := <-elected
	if b == nil {
		t.FailNow()
	}
	defer b.Resign(ctx)
	if b.Term() <= a.Term() {
		t.Fatalf("b's term %d, not above a's %d", b.Term(), a.Term())
	}
	if err := store.Do(ctx, "cidrs", b.Term(), b.ID(), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	// The overrun: a writes on after its leadership ended.
	if err := store.Do(ctx, "cidrs", a.Term(), a.ID(), func() error { return nil }); !errors.Is(err, fence.ErrStale) {
		t.Errorf("the deposed leader's write: %v, want fence.ErrStale", err)
	}
	if err := a.Resign(ctx); err != nil && !errors.Is(err, redlock.ErrExpired) {
		t.Errorf("the deposed leader's Resign: %v", err)
	}
}

// Observe shows each leader as it takes over, terms growing, and closes
// when its ctx ends.
func TestObserveShowsEachLeaderInTermOrder(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	e, _ := c.Election("observed")
	ctx, cancel := context.WithCancel(context.Background())
	seen := e.Observe(ctx)
	var terms []uint64
	for _, v := range []string{"one", "two", "three"} {
		ld, err := e.Campaign(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case info := <-seen:
			if info.Value != v || info.Term != ld.Term() {
				t.Errorf("observed %+v while %s leads with term %d", info, v, ld.Term())
			}
			terms = append(terms, info.Term)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s's leadership not observed in 5 s", v)
		}
		if err := ld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if terms[0] >= terms[1] || terms[1] >= terms[2] {
		t.Errorf("observed terms %v, not increasing", terms)
	}
	cancel()
	for range seen { // drains, then closes
	}
}

// Run leads, runs fn with its leadership, and returns fn's result; a ctx
// that ends while it campaigns ends it with ctx's cause. Bad input is
// refused.
func TestRunRunsTheFunctionWhileLeading(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	e, _ := c.Election("runner")
	ctx := context.Background()
	errDone := errors.New("done")
	var term uint64
	err := e.Run(ctx, "me", func(ctx context.Context, ld *redlock.Leadership) error {
		info, err := e.Leader(ctx)
		if err != nil || info.Value != "me" || info.Term != ld.Term() {
			t.Errorf("Leader inside Run: %+v, %v", info, err)
		}
		term = ld.Term()
		return errDone
	})
	if !errors.Is(err, errDone) || term == 0 {
		t.Errorf("Run: %v (term %d), want fn's error", err, term)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, redlock.ErrNoLeader) {
		t.Errorf("after Run returned: %v, want ErrNoLeader (it resigned)", err)
	}

	holder, err := e.Campaign(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Resign(ctx)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := e.Run(wctx, "me", func(context.Context, *redlock.Leadership) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run while another leads, ctx ending: %v, want context.DeadlineExceeded", err)
	}
	if err := e.Run(ctx, "me", nil); !errors.Is(err, redlock.ErrNilFunc) {
		t.Errorf("Run with a nil fn: %v", err)
	}
	if _, err := c.Election(""); !errors.Is(err, redlock.ErrEmptyName) {
		t.Errorf("an empty name: %v", err)
	}
}
