package redlock

import (
	"context"
	"errors"

	"github.com/quorumlock/redlock/internal/lease"
)

// Do acquires the lock called name (waiting as Lock does, and giving up
// on an outage as Lock does: WithMaxOutage), runs fn while
// holding it, and releases it when fn returns.
//
// While fn runs, the lock is extended every TTL/3, TTL being the lock's
// (For, or the client's; an Extend with For by fn changes it), or within
// half the validity left when that is sooner (a shortening by fn that
// failed pulls the validity back without changing the TTL). If the lock cannot be
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
// fn's context carries the lock (Lock.Context): a TryLock, Lock or Do of
// the same name through it with Reentrant reenters the lock instead of
// waiting for it. The Do calls on one lock (an outer one and the reentrant
// ones in it, or siblings through one context) share one watchdog, which
// runs while any of them does and cancels every one's fn when the lock is
// lost; the outermost Do's release ends the lock for all of them.
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
	root := l.root()
	keep := root.holds.keepAlive(&root.l, func(ctx context.Context) error { return root.Extend(ctx) })
	return hold(ctx, keep, l.Unlock, func(ctx context.Context) error { return fn(l.Context(ctx), l) })
}

// keepLease is the keep-alive of a lease that only one Do can hold (a
// multi-lock's, a permit's): its own watchdog, extending with extend.
func keepLease(l *lease.Lease, extend func(context.Context, ...LockOption) error) func(context.Context, context.CancelCauseFunc) func() {
	return func(fnCtx context.Context, cancel context.CancelCauseFunc) func() {
		return l.KeepAlive(fnCtx, cancel, func(ctx context.Context) error { return extend(ctx) })
	}
}

// hold runs fn while it keeps a lease (Do, DoMulti, ...): keep starts the
// keep-alive (extend every TTL/3, fn's context cancelled with ErrLockLost
// when the lease cannot be kept) and returns its stop; unlock runs when fn
// returns or panics.
func hold(ctx context.Context, keep func(context.Context, context.CancelCauseFunc) func(),
	unlock func(context.Context) error, fn func(context.Context) error) error {
	fnCtx, cancel := context.WithCancelCause(ctx)
	stop := keep(fnCtx, cancel)
	returned := false
	defer func() {
		if !returned {
			// Not recovered, so the panic goes on with its own stack trace.
			cancel(nil)
			stop()
			_ = unlock(context.WithoutCancel(ctx))
		}
	}()

	fnErr := fn(fnCtx)
	returned = true
	// fn's context ends with fn, before the release: work fn left running
	// on it must not outlive the lock.
	cancel(nil)
	stop()
	return errors.Join(fnErr, unlock(context.WithoutCancel(ctx)))
}
