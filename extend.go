package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

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
