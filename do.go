package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Do acquires the lock called name (waiting as Lock does, and giving up
// on an outage as Lock does: WithMaxOutage), runs fn while
// holding it, and releases it when fn returns.
//
// While fn runs, the lock is extended every TTL/3, TTL being the lock's
// (For, or the client's; an Extend with For by fn changes it). If the lock cannot be
// kept, the context passed to fn is cancelled with ErrLockLost as its cause
// (context.Cause): fn must stop touching the protected resource then. That
// happens as soon as an extension fails and the validity left would not
// last until the next try, or the lock is definitely gone, and at the
// latest when Done closes, a margin before the validity ends (Until; see
// Done), even while an extension is still waiting for the nodes. Do returns fn's error joined with Unlock's, so
// errors.Is(err, ErrExpired) tells the caller the critical section may
// have overlapped another holder. fn's context is cancelled as soon as fn
// returns, before the release, so work fn left running on it stops while
// the lock is still held.
//
// If fn panics (or calls runtime.Goexit), Do stops extending the lock and
// unlocks it before the panic goes on up the stack, unchanged: a caller
// that recovers it does not keep the lock. No goroutine started by Do
// outlives it.
//
// A nil fn is refused with ErrNilFunc before anything is sent.
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context, l *Lock) error, opts ...LockOption) error {
	if fn == nil {
		return ErrNilFunc
	}
	l, err := c.Lock(ctx, name, opts...)
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	stop := l.keepAlive(fnCtx, cancel)
	returned := false
	defer func() {
		if !returned {
			// Not recovered, so the panic goes on with its own stack trace.
			cancel(nil)
			stop()
			_ = l.Unlock(context.WithoutCancel(ctx))
		}
	}()

	fnErr := fn(fnCtx, l)
	returned = true
	// fn's context ends with fn, before the release: work fn left running
	// on it must not outlive the lock.
	cancel(nil)
	stop()
	return errors.Join(fnErr, l.Unlock(context.WithoutCancel(ctx)))
}

// keepAlive extends l every TTL/3 until the returned stop is called; stop
// waits for its goroutines to end. It cancels the function's context when
// an extension fails and the remaining validity would not last until the
// next try, or the lock is definitely gone, and when Done closes.
//
// Done is watched by a goroutine of its own: an extension can wait for the
// nodes up to the node timeout, which New allows to be close to TTL/2, and
// the validity can end meanwhile.
func (l *Lock) keepAlive(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	quit := make(chan struct{})
	// Extensions outlive a cancelled fn context (they keep the lock until
	// Unlock), but not stop: nobody needs an extension in flight then.
	extendCtx, endExtend := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-quit:
		case <-l.Done():
			if !l.l.Released() {
				l.c.log.Warn("redlock: lock validity ended while held", "lock", l.Name())
			}
			cancel(fmt.Errorf("%w: validity ended", ErrLockLost))
		}
	})
	wg.Go(func() { l.extendEvery(extendCtx, cancel, quit) })
	return func() {
		close(quit)
		endExtend()
		wg.Wait()
	}
}

// extendEvery is keepAlive's extension loop.
func (l *Lock) extendEvery(ctx context.Context, cancel context.CancelCauseFunc, quit <-chan struct{}) {
	interval := l.l.TTL() / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-l.Done():
			return // the watcher cancels
		case <-l.l.TTLMoved():
			// fn extended the lock to another TTL (For): a shorter one
			// must not wait for the timer armed under the longer.
			interval = l.l.TTL() / 3
			t.Reset(interval)
			continue
		case <-t.C:
		}
		err := l.Extend(ctx)
		if err == nil {
			// fn may have extended the lock to another TTL (For).
			interval = l.l.TTL() / 3
			t.Reset(interval)
			continue
		}
		if ctx.Err() != nil {
			return // stopped
		}
		if errors.Is(err, ErrExpired) || l.l.Remaining() <= interval {
			l.c.log.Warn("redlock: lock lost: extension failed", "lock", l.Name(), "err", err)
			cancel(fmt.Errorf("%w: %w", ErrLockLost, err))
			return
		}
		t.Reset(interval) // Extend logged the failure
	}
}
