package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

// A LockOption sets something for one lock: given to TryLock, Lock or Do
// it applies to that acquisition, given to Extend to that extension. For
// is the only one so far.
type LockOption func(*term)

// For sets the lock's TTL for this one call, in place of the client's
// (WithTTL): c.Lock(ctx, "report", redlock.For(time.Minute)) takes the lock
// for a minute, and l.Extend(ctx, redlock.For(time.Minute)) re-applies a
// minute from the start of the Extend call, shorter or longer than before.
//
// It is checked as WithTTL is, against the client's node timeout, drift
// factor and fencing retention, before anything is sent: ErrTTLTooShort,
// ErrTTLTooLong, ErrNoValidityBudget or ErrRetentionTooShort, wrapped, not
// a *QuorumError. The validity follows it as it follows the client's TTL
// (Until is start + ttl - drift, the drift being ttl × drift factor + 2ms),
// and so do Done's margin and Do's extension interval (a third of it).
//
// With fencing, every node that grants or extends a lock records the
// longest TTL it was given (its "longest TTL in use"), and a Repair of a
// node that lost its data waits that long: a lease longer than the other
// clients' makes repairs of its nodes wait longer, never too little.
func For(ttl time.Duration) LockOption {
	return func(ls *term) { ls.ttl, ls.arg = ttl, nil }
}

// term is one lock's TTL, and its milliseconds boxed once for the scripts.
type term struct {
	ttl       time.Duration
	arg       any
	reentrant bool // Reentrant
}

// defaultLease is the client's TTL, as WithTTL set it.
func (c *Client) defaultLease() term { return term{ttl: c.cfg.ttl, arg: c.args.ttl} }

// leaseOf applies opts to base and checks the TTL they set. A nil option
// is ErrNilOption.
func (c *Client) leaseOf(base term, opts []LockOption) (term, error) {
	ls := base
	for i, o := range opts {
		if o == nil {
			return term{}, fmt.Errorf("%w: opts[%d]", ErrNilOption, i)
		}
		o(&ls)
	}
	if ls.arg != nil {
		return ls, nil // base, unchanged
	}
	if err := c.cfg.validateTTL(ls.ttl, "For"); err != nil {
		return term{}, err
	}
	ls.arg = ls.ttl.Milliseconds()
	return ls, nil
}

// validity is how long after an operation's start a lease of ttl is
// valid: the TTL less the drift allowance.
func (c *config) validity(ttl time.Duration) time.Duration { return ttl - c.driftOf(ttl) }

// extend is every primitive's Extend of lease l (Lock.Extend states the
// contract): one at a time, opts checked before anything is sent, the
// warning logged and the observer told.
func (c *Client) extend(ctx context.Context, l *lease.Lease, opts []LockOption) error {
	done, err := l.ExtendTurn(ctx)
	if err != nil {
		return publicError(err)
	}
	defer done()
	ls := term{ttl: l.TTL()}
	if len(opts) > 0 {
		if ls, err = c.leaseOf(ls, opts); err != nil {
			return err
		}
		if ls.reentrant {
			return fmt.Errorf("%w: Reentrant, given to Extend", ErrNotForExtend)
		}
	} else {
		ls.arg = ls.ttl.Milliseconds()
	}
	start := c.cfg.clock.Now()
	until, nodes, err := l.Extend(ctx, start, lease.Term{TTL: ls.ttl, Arg: ls.arg})
	err = publicError(err)
	if err != nil && !errors.Is(err, ErrReleased) {
		c.log.Warn("redlock: extension failed", "lock", l.Name(), "err", err)
	}
	c.observe(ctx, "extend", l.Name(), start, nodes, nil, l.Token(), until, err)
	return err
}

// release is every primitive's release of lease l (Lock.Unlock states the
// contract), reported to the observer.
func (c *Client) release(ctx context.Context, l *lease.Lease) error {
	return l.Release(ctx, func(start time.Time, nodes []NodeResult, err error) error {
		err = publicError(err)
		c.observe(ctx, "unlock", l.Name(), start, nodes, nil, l.Token(), time.Time{}, err)
		return err
	})
}
