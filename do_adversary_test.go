package redlock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// afterHook runs f after the command got its reply, before the caller sees it.
type afterHook func(ctx context.Context, script string)

func (h afterHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h afterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h afterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h(ctx, redlock.ScriptName(cmd.Args()))
		return err
	}
}

// From an adversarial review: fn's context is still live after fn returned, while Do's Unlock
// has already deleted the keys and another client holds the lock. Do
// cancels fnCtx only in its deferred cancel(nil), after Unlock returns.
func TestDoEndsFnsContextBeforeTheRelease(t *testing.T) {
	cl := startCluster(t, 3)
	opts := []redlock.Option{redlock.WithTTL(3 * time.Second), redlock.WithNodeTimeout(time.Second)}
	var slowRelease atomic.Bool
	a := cl.hooked(t, afterHook(func(ctx context.Context, script string) {
		if script == "release" && slowRelease.Load() {
			time.Sleep(500 * time.Millisecond) // the release was applied; its reply is late
		}
	}), opts...)
	b := cl.newClient(t, opts...)
	ctx := context.Background()
	liveWhenBHeld := make(chan bool, 1)
	err := a.Do(ctx, "adv-a", func(fnCtx context.Context, l *redlock.Lock) error {
		slowRelease.Store(true)
		go func() { // work fn left bound to its context
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if lb, err := b.TryLock(ctx, "adv-a"); err == nil {
					liveWhenBHeld <- fnCtx.Err() == nil
					lb.Unlock(ctx)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			close(liveWhenBHeld)
		}()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	live, ok := <-liveWhenBHeld
	if !ok {
		t.Fatal("B never got the lock")
	}
	if live {
		t.Error("BROKE: B held the lock while the context Do gave fn was still live")
	}
}

// From an adversarial review: fn returns while an extension hangs. stop() closes quit first, so
// the validity watcher is gone; Do then waits for the hanging extension,
// past the validity end, with fnCtx live, while B takes the lock.
func TestDoDoesNotWaitForAnExtensionAfterFnReturns(t *testing.T) {
	cl := startCluster(t, 3)
	const ttl, timeout = 2 * time.Second, 900 * time.Millisecond
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(timeout)}
	started := make(chan struct{})
	var once atomic.Bool
	a := cl.hooked(t, scriptHook(func(ctx context.Context, script string) error {
		if script != "extend" {
			return nil
		}
		if once.CompareAndSwap(false, true) {
			close(started)
		}
		<-ctx.Done() // paused nodes
		return ctx.Err()
	}), opts...)
	b := cl.newClient(t, opts...)
	ctx := context.Background()
	liveWhenBHeld := make(chan bool, 1)
	var returned time.Time
	var until time.Time
	err := a.Do(ctx, "adv-b", func(fnCtx context.Context, l *redlock.Lock) error {
		<-started
		until = l.Until()
		go func() {
			deadline := time.Now().Add(4 * ttl)
			for time.Now().Before(deadline) {
				if lb, err := b.TryLock(ctx, "adv-b"); err == nil {
					liveWhenBHeld <- fnCtx.Err() == nil
					lb.Unlock(ctx)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			close(liveWhenBHeld)
		}()
		returned = time.Now()
		return nil
	})
	t.Logf("Do returned %v after fn did (%v after the validity end): %v", time.Since(returned), time.Since(until), err)
	live, ok := <-liveWhenBHeld
	if !ok {
		t.Fatal("B never got the lock")
	}
	if live {
		t.Error("BROKE: B held the lock while the context Do gave fn was still live (extension in flight)")
	}
}

// From an adversarial review: an extension applied on the nodes whose reply comes after the
// validity end: Extend says ErrExpired, but the keys were re-armed for a
// full TTL. Does Do still release them?
func TestLateExtensionReplyUnderDo(t *testing.T) {
	cl := startCluster(t, 3)
	const ttl = 3 * time.Second
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(time.Second)}
	var n atomic.Int32
	n.Store(100) // warm-up: load the scripts unslowed
	a := cl.hooked(t, afterHook(func(ctx context.Context, script string) {
		if script == "extend" && n.Add(1) <= 3 {
			time.Sleep(2200 * time.Millisecond) // applied at ~1 s, reply at ~3.2 s: past Until (~2.95 s)
		}
	}), opts...)
	ctx := context.Background()
	if w, err := a.TryLock(ctx, "warm"); err == nil {
		w.Extend(ctx)
		w.Unlock(ctx)
	}
	n.Store(0)
	t0 := time.Now()
	err := a.Do(ctx, "adv-c", func(fnCtx context.Context, l *redlock.Lock) error {
		<-fnCtx.Done()
		t.Logf("fnCtx done at %v: %v; until %v", time.Since(t0), context.Cause(fnCtx), l.Until().Sub(t0))
		time.Sleep(400 * time.Millisecond) // the late extension lands
		for i, c := range cl.inspect {
			t.Logf("node %d PTTL %v at %v", i, c.PTTL(ctx, "redlock:{adv-c}").Val(), time.Since(t0))
		}
		return nil
	})
	t.Logf("Do: %v", err)
	for i, h := range cl.holdersOnceReleased(t, "adv-c") {
		if h != "" {
			t.Errorf("BROKE: node %d still holds the lock after Do returned", i)
		}
	}
	// And plain Lock: Extend says ErrExpired yet the nodes hold a full TTL.
	n.Store(0)
	l, err := a.TryLock(ctx, "adv-c2")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	err = l.Extend(ctx)
	held := 0
	for _, h := range cl.holders(t, "adv-c2") {
		if h != "" {
			held++
		}
	}
	t.Logf("plain Extend: %v; %d nodes hold the key after it (remaining PTTL ~ full TTL)", err, held)
	l.Unlock(ctx)
}

// From an adversarial review: a zero *redis.Client (not nil) passes New; the first lock then
// panics in a library goroutine, which no caller can recover.
func TestZeroClientDoesNotCrashTheProcess(t *testing.T) {
	if os.Getenv("ADV_CHILD") == "1" {
		cl := startCluster(t, 3)
		nodes := []redis.UniversalClient{cl.clients[0], cl.clients[1], &redis.Client{}}
		c, err := redlock.New(nodes)
		if err != nil {
			t.Logf("New refused: %v", err)
			return
		}
		defer c.Close()
		func() {
			defer func() { recover() }()
			l, err := c.TryLock(context.Background(), "z")
			if err == nil {
				l.Unlock(context.Background())
			}
		}()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestZeroClientDoesNotCrashTheProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "ADV_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "panic") {
		i := strings.Index(string(out), "panic")
		t.Errorf("BROKE: the process crashed: %.600s", out[i:])
	} else {
		t.Logf("child: %v\n%s", err, out)
	}
}

// releasePanics is a client hook that panics on every release script.
type releasePanics struct{}

func (releasePanics) DialHook(next redis.DialHook) redis.DialHook { return next }
func (releasePanics) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) == "release" {
			panic("test: the client panics on a release")
		}
		return next(ctx, cmd)
	}
}
func (releasePanics) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// From the adversarial review of the calls that ride a batch (older than
// it): the rollback of a lost attempt, and the release's retries, call the
// node's client on goroutines of their own, outside any round's guard, and
// a client that panicked there ended the process. It fails that node's
// call now, as in a round.
func TestARollbackOnAPanickingClientFailsOnlyThatNode(t *testing.T) {
	if os.Getenv("ADV_CHILD") == "1" {
		cl := startCluster(t, 3)
		c := cl.hookedOn(t, map[int]redis.Hook{0: releasePanics{}}, redlock.WithTTL(20*time.Second))
		cl.holdAsStranger(t, "rp", 1, 2) // node 0 grants, the attempt is lost: node 0 is rolled back
		if _, err := c.TryLock(context.Background(), "rp"); !errors.Is(err, redlock.ErrLocked) {
			t.Errorf("TryLock: %v, want ErrLocked", err)
		}
		time.Sleep(100 * time.Millisecond) // the rollback has been tried
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestARollbackOnAPanickingClientFailsOnlyThatNode$", "-test.v")
	cmd.Env = append(os.Environ(), "ADV_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed (%v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the child did not run the test:\n%s", out)
	}
}

// From an adversarial review: names with NUL, newline, invalid UTF-8 and braces that could alias.
func TestOddNamesDoNotAlias(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(5*time.Second))
	ctx := context.Background()
	names := []string{"x", "x}:queue", "x}", "x}:queue:seen", "x}:next", "x}:fence:high", "{x", "a\x00b", "a\nb", "\xff\xfe", "x}:released", "x:promised:0"}
	var held []*redlock.Lock
	for _, n := range names {
		l, err := c.TryLock(ctx, n)
		if err != nil {
			t.Errorf("BROKE? %q: %v", n, err)
			continue
		}
		held = append(held, l)
	}
	for _, l := range held {
		if err := l.Extend(ctx); err != nil {
			t.Errorf("extend %q: %v", l.Name(), err)
		}
	}
	tokens := map[uint64]string{}
	for _, l := range held {
		if o, dup := tokens[l.Token()]; dup {
			t.Logf("%q and %q share token %d", o, l.Name(), l.Token())
		}
		tokens[l.Token()] = l.Name()
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("unlock %q: %v", l.Name(), err)
		}
	}
	// Queue: a waiter on "x" must not be woken by "x}:released"-like names.
	l, _ := c.TryLock(ctx, "x")
	got := lockAndUnlock(c, "x}:queue", 3*time.Second)
	if err := <-got; err != nil {
		t.Errorf("locking x}:queue while x is held: %v", err)
	}
	if l != nil {
		l.Unlock(ctx)
	}
	_ = errors.New
}

func TestDoWithGoexitSelfUnlockAndCancel(t *testing.T) {
	cl := startCluster(t, 3)
	opts := []redlock.Option{redlock.WithTTL(3 * time.Second), redlock.WithNodeTimeout(200 * time.Millisecond)}
	a := cl.newClient(t, opts...)
	b := cl.newClient(t, opts...)
	ctx := context.Background()
	free := func(what string) {
		t.Helper()
		l, err := b.TryLock(ctx, "adv-f")
		if err != nil {
			t.Errorf("BROKE: after %s the lock is still held: %v", what, err)
			return
		}
		l.Unlock(ctx)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Do(ctx, "adv-f", func(context.Context, *redlock.Lock) error { runtimeGoexit(); return nil })
	}()
	<-done
	free("Goexit")

	var cause error
	err := a.Do(ctx, "adv-f", func(fnCtx context.Context, l *redlock.Lock) error {
		if err := l.Unlock(ctx); err != nil {
			return err
		}
		select {
		case <-fnCtx.Done():
			cause = context.Cause(fnCtx)
		case <-time.After(time.Second):
		}
		return nil
	})
	t.Logf("fn unlocked itself: Do %v; fnCtx cause after its own Unlock: %v", err, cause)
	free("fn's own Unlock")

	cctx, cancel := context.WithCancel(ctx)
	err = a.Do(cctx, "adv-f", func(fnCtx context.Context, l *redlock.Lock) error {
		cancel()
		<-fnCtx.Done()
		return context.Cause(fnCtx)
	})
	t.Logf("caller cancelled: Do %v", err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Do after the caller cancelled: %v", err)
	}
	free("the caller's cancel")
}
func runtimeGoexit() { runtime.Goexit() }
