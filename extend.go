package redlock

import (
	"context"
	_ "embed"
	"errors"

	"github.com/quorumlock/redlock/internal/lease"
)

// Extend re-applies the lock's TTL on every node that still holds this
// lock's value: the TTL it was acquired with (For, or the client's), or the
// one the last successful Extend applied. With For it applies that TTL
// instead, from now, and keeps it for later extensions: a shorter one
// shortens the lock. It succeeds only if a majority extended it within the
// validity; Until then becomes the start of the call + TTL - drift, earlier
// than before if the TTL was shortened enough. It never re-creates an
// expired key, and it fails with ErrExpired once Done has closed. An
// invalid For is refused as TryLock refuses it, before anything is sent,
// and leaves the lock as it was. It waits for a majority up to the round's
// patience (see WithNodeTimeout), or until ctx ends: the error is then a
// *QuorumError of Kind ErrUnavailable (ErrExpired if a majority refused)
// with ctx's error as its Cause and every node's outcome, the silent ones
// NodeTimedOut with an Err that wraps ctx's error.
//
// An Extend that shortens the TTL and fails may still have shortened it
// on some nodes (those it reached, or that ran it after it gave up on
// them): Until then moves back to where a success would have put it, if
// that is earlier, and Done closes by it.
//
// Once Unlock has begun on this Lock, Extend fails with ErrReleased, also
// when the Unlock began while the extension was in flight and took the
// keys from under it (the Extend then waits for that Unlock's outcome):
// ErrExpired means the lock ran out while held, never that this handle
// released it. An extension refused while an Unlock that itself found
// the lock gone (ErrExpired) was under way is ErrExpired, not ErrReleased:
// another holder may have had it.
//
// Extends of one Lock run one at a time, in the order they get their
// turn (a call waiting for its turn gives up when ctx ends, with a
// *QuorumError of Kind ErrUnavailable): two in flight with different TTLs
// could leave each node with the TTL it ran last and Until with the one
// decided last, a minute ahead of keys that expire in seconds.
func (l *Lock) Extend(ctx context.Context, opts ...LockOption) error {
	done, err := l.l.ExtendTurn(ctx)
	if err != nil {
		return publicError(err)
	}
	defer done()
	ls := term{ttl: l.l.TTL()}
	if len(opts) > 0 {
		if ls, err = l.c.leaseOf(ls, opts); err != nil {
			return err
		}
	} else {
		ls.arg = ls.ttl.Milliseconds()
	}
	start := l.c.cfg.clock.Now()
	until, nodes, err := l.l.Extend(ctx, start, lease.Term{TTL: ls.ttl, Arg: ls.arg})
	err = publicError(err)
	if err != nil && !errors.Is(err, ErrReleased) {
		l.c.log.Warn("redlock: extension failed", "lock", l.Name(), "err", err)
	}
	l.c.observe(ctx, "extend", l.Name(), start, nodes, nil, l.Token(), until, err)
	return err
}
