package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

var reviewOpts = []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(200 * time.Millisecond)}

// A Campaign whose first Proclaim reaches one node of three and then fails
// is reported by Leader (and so Observe) as the leader, with its value,
// although Campaign then fails and resigns: it never took office. The
// docs: "ErrNoLeader ... one that has published nothing yet (a Campaign
// that has not returned)".
func TestLeaderDoesNotShowACandidateWhoseFirstProclaimFails(t *testing.T) {
	cl := startCluster(t, 3)
	hold := make(chan struct{})
	held := make(chan struct{})
	var once sync.Once
	hooks := map[int]redis.Hook{
		1: &argsHook{before: func(args []any) error {
			if isProclaim(args) {
				return errLinkCut
			}
			return nil
		}},
		2: &argsHook{before: func(args []any) error {
			if isProclaim(args) {
				once.Do(func() { close(held) })
				select {
				case <-hold:
				case <-time.After(5 * time.Second):
				}
				return errLinkCut
			}
			return nil
		}},
	}
	e, _ := cl.hookedOn(t, hooks, reviewOpts...).Election("phantom")
	eo, _ := cl.newClient(t, reviewOpts...).Election("phantom")
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		ld, err := e.Campaign(ctx, "never-led")
		if ld != nil {
			ld.Resign(ctx)
		}
		done <- err
	}()
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("no proclaim")
	}
	time.Sleep(50 * time.Millisecond) // node 0 answered
	info, lerr := eo.Leader(ctx)
	close(hold)
	cerr := <-done
	t.Logf("Leader during the campaign: %+v, %v", info, lerr)
	t.Logf("Campaign: %v", cerr)
	if cerr != nil && lerr == nil {
		t.Errorf("Leader reported %q (term %d) as leader; its Campaign failed: %v", info.Value, info.Term, cerr)
	}
	if _, err := eo.Leader(ctx); !errors.Is(err, redlock.ErrNoLeader) {
		t.Errorf("after the failed campaign: %v", err)
	}
}

// Campaign whose ctx is cancelled right after Lock (in the first proclaim
// call): it must fail and leave the lock free.
func TestACampaignCancelledAfterItsLockLeavesTheLockFree(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &argsHook{before: func(args []any) error {
		if isProclaim(args) {
			cancel()
		}
		return nil
	}}
	c := cl.hookedOn(t, map[int]redis.Hook{0: h, 1: h, 2: h}, reviewOpts...)
	e, _ := c.Election("cancelled")
	ld, err := e.Campaign(ctx, "v")
	t.Logf("Campaign: %v, %v", ld, err)
	if err == nil {
		t.Fatal("Campaign succeeded with a cancelled ctx")
	}
	info, ierr := cl.newClient(t, reviewOpts...).Inspect(context.Background(), "cancelled")
	if ierr != nil || info.Held {
		t.Errorf("lock after the failed campaign: held=%v %v", info.Held, ierr)
	}
}

// A value key of the wrong type: Campaign fails (wrong type), the lock is
// left free, and Run returns at once rather than campaigning in a loop.
func TestAValueKeyOfAnotherTypeEndsRunAtOnce(t *testing.T) {
	cl := startCluster(t, 3)
	for _, in := range cl.inspect {
		if err := in.Set(context.Background(), "redlock:{wt}:leader", "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var acquires atomic.Int64
	h := &faultHook{before: func(s string) error {
		if s == "acquire" {
			acquires.Add(1)
		}
		return nil
	}}
	c := cl.actor(t, []*faultHook{h, h, h}, reviewOpts...)
	e, _ := c.Election("wt")
	ctx := context.Background()
	_, err := e.Campaign(ctx, "v")
	t.Logf("Campaign: %v (ErrWrongType: %v)", err, errors.Is(err, redlock.ErrWrongType))
	if !errors.Is(err, redlock.ErrWrongType) {
		t.Errorf("Campaign: %v, want ErrWrongType", err)
	}
	info, _ := cl.newClient(t, reviewOpts...).Inspect(ctx, "wt")
	if info.Held {
		t.Errorf("lock held after the failed campaign")
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	acquires.Store(0)
	start := time.Now()
	err = e.Run(rctx, "v", func(context.Context, *redlock.Leadership) error { return nil })
	t.Logf("Run: %v after %v, %d acquire calls", err, time.Since(start).Round(time.Millisecond), acquires.Load())
	if !errors.Is(err, redlock.ErrWrongType) {
		t.Errorf("Run: %v, want ErrWrongType", err)
	}
	_, lerr := e.Leader(ctx)
	t.Logf("Leader: %v", lerr)
}

// Run with a majority down: it must not spin, and returns ctx's cause.
func TestRunWithAMajorityDownDoesNotSpin(t *testing.T) {
	cl := startCluster(t, 3)
	var acquires atomic.Int64
	h := &faultHook{before: func(s string) error {
		if s == "acquire" {
			acquires.Add(1)
		}
		return nil
	}}
	opts := append([]redlock.Option{redlock.WithMaxOutage(300 * time.Millisecond)}, reviewOpts...)
	c := cl.actor(t, []*faultHook{h, h, h}, opts...)
	e, _ := c.Election("down")
	cl.pause(t, 1, 2)
	ctx, cancel := context.WithTimeoutCause(context.Background(), 3*time.Second, errors.New("review: done"))
	defer cancel()
	ran := 0
	err := e.Run(ctx, "v", func(context.Context, *redlock.Leadership) error { ran++; return nil })
	t.Logf("Run: %v; fn ran %d; acquire calls on node 0: %d", err, ran, acquires.Load())
	if err == nil || err.Error() != "review: done" {
		t.Errorf("Run: %v, want ctx's cause", err)
	}
	if acquires.Load() > 200 {
		t.Errorf("%d acquire calls in 3 s: spinning", acquires.Load())
	}
}

// Run campaigns again after the leadership is lost (extensions cut), and
// fn's ctx cause is ErrLockLost; Run's second term is greater.
func TestRunCampaignsAgainAfterALoss(t *testing.T) {
	cl := startCluster(t, 3)
	var cut atomic.Bool
	h := &faultHook{before: func(s string) error {
		if s == "extend" && cut.Load() {
			return errLinkCut
		}
		return nil
	}}
	c := cl.actor(t, []*faultHook{h, h, h}, reviewOpts...)
	e, _ := c.Election("again")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var terms []uint64
	var causes []error
	err := e.Run(ctx, "v", func(fctx context.Context, ld *redlock.Leadership) error {
		terms = append(terms, ld.Term())
		if len(terms) == 1 {
			cut.Store(true)
			<-fctx.Done()
			causes = append(causes, context.Cause(fctx))
			cut.Store(false)
			return fctx.Err()
		}
		return nil
	})
	t.Logf("Run: %v, terms %v, causes %v", err, terms, causes)
	if err != nil || len(terms) != 2 || terms[1] <= terms[0] || !errors.Is(causes[0], redlock.ErrLockLost) {
		t.Errorf("Run after loss: %v, terms %v, causes %v", err, terms, causes)
	}
}

// Resign racing the keep-alive, Proclaim and Leader, with a short TTL,
// under -race; a double Resign returns nil; Proclaim after Resign fails;
// each handover gives a greater term.
func TestResignRacingTheKeepAliveHandsOver(t *testing.T) {
	cl := startCluster(t, 3)
	opts := []redlock.Option{redlock.WithTTL(150 * time.Millisecond), redlock.WithNodeTimeout(20 * time.Millisecond)}
	e, _ := cl.newClient(t, opts...).Election("race")
	eo, _ := cl.newClient(t, opts...).Election("race")
	ctx := context.Background()
	last := uint64(0)
	for i := 0; i < 15; i++ {
		ld, err := e.Campaign(ctx, fmt.Sprint("v", i))
		if err != nil {
			t.Fatal(err)
		}
		if ld.Term() <= last {
			t.Errorf("term %d after %d", ld.Term(), last)
		}
		last = ld.Term()
		var wg sync.WaitGroup
		wg.Go(func() { _ = ld.Proclaim(ctx, "p") })
		wg.Go(func() { _, _ = eo.Leader(ctx) })
		wg.Go(func() { _ = ld.Value() })
		time.Sleep(time.Duration(i*7) * time.Millisecond) // across the keep-alive's TTL/3
		errs := make([]error, 2)
		wg.Go(func() { errs[0] = ld.Resign(ctx) })
		wg.Go(func() { errs[1] = ld.Resign(ctx) })
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Errorf("round %d: Resigns %v", i, errs)
		}
		if err := ld.Proclaim(ctx, "late"); !errors.Is(err, redlock.ErrNotLeader) {
			t.Errorf("Proclaim after Resign: %v", err)
		}
		if c := context.Cause(ld.Context(ctx)); !errors.Is(c, redlock.ErrResigned) {
			t.Errorf("cause after Resign: %v", c)
		}
	}
}

// Observe: its goroutine ends when ctx ends even while nobody reads and a
// majority is paused (a Leader round in flight).
func TestObserveEndsWithItsCtx(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, reviewOpts...)
	e, _ := c.Election("obs")
	ld, err := e.Campaign(context.Background(), "v")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(context.Background())
	// The first Observe starts the client's subscribers (one per node,
	// for the client's life, as a waiting Lock does): counted in base.
	warm, stop := context.WithCancel(context.Background())
	defer stop()
	for range e.Observe(warm) {
		stop()
	}
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		ch := e.Observe(ctx)
		time.Sleep(20 * time.Millisecond) // unread: blocked sending
		cancel()
		select {
		case _, ok := <-ch:
			for ok {
				_, ok = <-ch
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Observe's channel did not close")
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := runtime.NumGoroutine(); n > base+5 {
		t.Errorf("goroutines %d, were %d", n, base)
	}
}

// WithoutFencing leaves WithRetention unchecked, and the value key lives
// retention: a leader's published value expires while it leads, and
// Leader then reports ErrNoLeader for an election that has a leader.
func TestAnUnfencedLeadersValueOutlivesAShortRetention(t *testing.T) {
	cl := startCluster(t, 3)
	opts := append([]redlock.Option{redlock.WithoutFencing(), redlock.WithRetention(100 * time.Millisecond)}, reviewOpts...)
	c, err := redlock.New(cl.clients, opts...)
	if err != nil {
		t.Skipf("New refuses: %v", err)
	}
	defer c.Close()
	e, _ := c.Election("unfenced")
	ctx := context.Background()
	ld, err := e.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	time.Sleep(250 * time.Millisecond)
	info, err := e.Leader(ctx)
	t.Logf("Leader 250 ms into the leadership: %+v, %v (still leading: %v)", info, err, ld.Context(ctx).Err() == nil)
	if err != nil && ld.Context(ctx).Err() == nil {
		t.Errorf("Leader: %v while %s leads", err, ld.ID())
	}
}
