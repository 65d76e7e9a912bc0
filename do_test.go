package redlock_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Do: fn's context ends before the release, Do returns without waiting for
// an extension, and fn may exit by runtime.Goexit or unlock its own lock.

// From an adversarial review: fn's context is still live after fn returned, while Do's Unlock
// has already deleted the keys and another client holds the lock. Do
// cancels fnCtx only in its deferred cancel(nil), after Unlock returns.
// Origin: the adversarial review of Do and the client's panics.
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
// Origin: the adversarial review of Do and the client's panics.
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
// Origin: the adversarial review of Do and the client's panics.
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

// Origin: the adversarial review of Do and the client's panics.
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
