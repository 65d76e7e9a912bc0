package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// scriptHook runs before every library script a go-redis client sends. It
// gets the call's context, may block, and fails the call unsent with the
// error it returns.
type scriptHook func(ctx context.Context, script string) error

func (h scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h(ctx, redlock.ScriptName(cmd.Args())); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// hooked is a lock client whose wires to every node run h.
func (cl *cluster) hooked(t *testing.T, h redis.Hook, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	on := make(map[int]redis.Hook)
	for i := range cl.nodes {
		on[i] = h
	}
	return cl.hookedOn(t, on, opts...)
}

// hangSecondExtension fails the first extension at once on every node (a
// short outage: the watchdog retries, as plenty of validity is left), and
// makes every later one hang until its node timeout, as a paused node does.
func hangSecondExtension() scriptHook {
	var extends atomic.Int32
	return func(ctx context.Context, script string) error {
		if script != "extend" {
			return nil
		}
		if extends.Add(1) <= 3 {
			return errLinkCut
		}
		<-ctx.Done()
		return ctx.Err()
	}
}

// With a node timeout near TTL/2 (New accepts it), an extension can still
// be in flight when the validity ends. The watchdog used to wait for it, so
// fn kept running after another client had the lock (issue 11, item 4).
// Here the second extension hangs from 2/3 TTL to 2/3 TTL plus the node
// timeout, past the validity end: fn's context must be done before another
// client can take the lock.
func TestDoCancelsAtTheValidityEndWhileAnExtensionHangs(t *testing.T) {
	cl := startCluster(t, 3)
	const ttl, timeout = 2 * time.Second, 900 * time.Millisecond
	// The drift allowance (102 ms) is the time between the validity end
	// and the earliest moment the keys can expire.
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(timeout), redlock.WithDriftFactor(0.05)}
	a := cl.hooked(t, hangSecondExtension(), opts...)
	b := cl.newClient(t, opts...)
	ctx := context.Background()

	var fnStopped atomic.Bool
	var until, cancelled time.Time
	bGot := make(chan bool, 1) // whether A's fn had stopped when B got the lock
	err := a.Do(ctx, "watchdog", func(fnCtx context.Context, l *redlock.Lock) error {
		go func() {
			deadline := time.Now().Add(3 * ttl)
			for time.Now().Before(deadline) {
				if lb, err := b.TryLock(ctx, "watchdog"); err == nil {
					bGot <- fnStopped.Load()
					lb.Unlock(ctx)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			close(bGot)
		}()
		select {
		case <-fnCtx.Done():
			cancelled, until = time.Now(), l.Until()
			fnStopped.Store(true)
			return context.Cause(fnCtx)
		case <-time.After(3 * ttl):
			return errors.New("fn's context was never cancelled")
		}
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v, want ErrLockLost", err)
	}
	stopped, ok := <-bGot
	if !ok {
		t.Fatal("B never got the lock")
	}
	t.Logf("fn's context cancelled %v after the validity end", cancelled.Sub(until))
	if !stopped {
		t.Errorf("B got the lock while A's fn still ran (its context was cancelled %v after the validity end)",
			cancelled.Sub(until))
	}
}

// The keys are set after the acquisition starts, so they last at least
// until start + TTL (less the drift). Until used to be start + TTL - elapsed
// - drift, counting the acquisition's time twice: a slow acquisition got a
// lock that ended early (issue 11, item 4). The same for Extend.
func TestUntilCountsFromTheStartOnce(t *testing.T) {
	cl := startCluster(t, 3)
	const ttl, timeout = time.Second, 480 * time.Millisecond
	const slow = 400 * time.Millisecond // 40% of the TTL
	var slowed atomic.Bool
	hook := func(ctx context.Context, script string) error {
		if slowed.Load() && (script == "acquire" || script == "extend") {
			time.Sleep(slow)
		}
		return nil
	}
	c := cl.hooked(t, scriptHook(hook), redlock.WithTTL(ttl), redlock.WithNodeTimeout(timeout))
	validity := ttl - redlock.Drift(c)
	ctx := context.Background()
	// Load the scripts first: a NOSCRIPT reply makes a second, slowed call.
	warm, err := c.TryLock(ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	warm.Unlock(ctx)
	slowed.Store(true)

	before := time.Now()
	l, err := c.TryLock(ctx, "slow")
	returned := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	check := func(op string, before, returned time.Time) {
		until := l.Until()
		t.Logf("%s took %v; Until is %v after it returned", op, returned.Sub(before), until.Sub(returned))
		if !until.After(returned) {
			t.Errorf("%s returned a lock whose validity had already ended", op)
		}
		if until.Before(before.Add(validity)) || until.After(returned.Add(validity)) {
			t.Errorf("%s: Until is %v after the call began, want between %v and %v (TTL - drift from the start)",
				op, until.Sub(before), validity, returned.Sub(before)+validity)
		}
	}
	check("TryLock", before, returned)

	before = time.Now()
	if err := l.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	check("Extend", before, time.Now())
}

var errPanic = errors.New("test: fn panicked")

// A caller that recovers a panic from fn (net/http does) used to leave the
// lock held, and extended by the watchdog, for the life of the process
// (issue 11, item 5).
func TestDoReleasesTheLockWhenFnPanics(t *testing.T) {
	cl := startCluster(t, 3)
	ignore := goleak.IgnoreCurrent()
	const ttl = 2 * time.Second
	c, err := redlock.New(cl.clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	other := cl.newClient(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()

	var got any
	func() {
		defer func() { got = recover() }()
		_ = c.Do(ctx, "panics", func(context.Context, *redlock.Lock) error { panic(errPanic) })
	}()
	if got != errPanic {
		t.Errorf("recovered %v, want fn's panic value", got)
	}
	l, err := other.TryLock(ctx, "panics")
	if err != nil {
		t.Errorf("TryLock right after fn panicked: %v", err)
	} else {
		l.Unlock(ctx)
	}
	c.Close()
	other.Close() // its idle workers would count
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines left after Do panicked and the client closed: %v", err)
	}
}
