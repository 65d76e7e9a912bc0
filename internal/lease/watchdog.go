package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
)

// KeepAlive is the watchdog of a lease held while a function runs (the
// root package's Do): it extends l every TTL/3 (sooner while the validity
// is nearer than the TTL says: keepAliveEvery), with extend (the
// primitive's Extend, which reports to the observer), until the returned
// stop is called; stop waits for its goroutines to end. It cancels the function's context when
// an extension fails and the remaining validity would not last until the
// next try, or the lock is definitely gone, and when Done closes.
//
// Done is watched by a goroutine of its own: an extension can wait for the
// nodes up to the node timeout, which New allows to be close to TTL/2, and
// the validity can end meanwhile.
func (l *Lease) KeepAlive(ctx context.Context, cancel context.CancelCauseFunc, extend func(context.Context) error) (stop func()) {
	quit := make(chan struct{})
	// Extensions outlive a cancelled fn context (they keep the lock until
	// Unlock), but not stop: nobody needs an extension in flight then.
	extendCtx, endExtend := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-quit:
		case <-l.Done():
			if !l.Released() {
				l.e.Log.Warn("redlock: lock validity ended while held", "lock", l.name)
			}
			cancel(fmt.Errorf("%w: validity ended", kind.ErrLockLost))
		}
	})
	wg.Go(func() { l.extendEvery(extendCtx, cancel, quit, extend) })
	return func() {
		close(quit)
		endExtend()
		wg.Wait()
	}
}

// extendEvery is KeepAlive's extension loop.
func (l *Lease) extendEvery(ctx context.Context, cancel context.CancelCauseFunc, quit <-chan struct{},
	extend func(context.Context) error) {
	interval := l.keepAliveEvery()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-l.Done():
			return // the watcher cancels
		case <-l.ttlMoved:
			// fn extended the lock to another TTL (For), or a shortening
			// pulled the validity back: a nearer end must not wait for
			// the timer armed under the longer.
			interval = l.keepAliveEvery()
			t.Reset(interval)
			continue
		case <-t.C:
		}
		err := extend(ctx)
		if err == nil {
			// fn may have extended the lock to another TTL (For), and
			// an unheard shorter call may have cut this one (unheard.go).
			interval = l.keepAliveEvery()
			t.Reset(interval)
			continue
		}
		if ctx.Err() != nil {
			return // stopped
		}
		if errors.Is(err, kind.ErrExpired) || l.Remaining() <= interval {
			l.e.Log.Warn("redlock: lock lost: extension failed", "lock", l.name, "err", err)
			cancel(fmt.Errorf("%w: %w", kind.ErrLockLost, err))
			return
		}
		t.Reset(interval) // Extend logged the failure
	}
}

// keepAliveEvery is how long the keep-alive waits for its next extension:
// TTL/3, or half the validity left if that is sooner. A shortening that
// failed leaves the TTL as it was but the validity pulled back, and every
// later extension cut by its unheard calls (unheard.go): extending by the
// TTL's pace would let the lock end between two extensions.
func (l *Lease) keepAliveEvery() time.Duration {
	return max(min(l.TTL()/3, l.Remaining()/2), time.Millisecond)
}
