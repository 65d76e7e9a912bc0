package redlock

import (
	"context"
	_ "embed"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

// TryLock makes one attempt to acquire the lock called name. It sends the
// acquisition to every node at once and returns as soon as the outcome is
// decided: a majority granted, or a majority can no longer grant.
//
// On success the lock is valid until Until. On failure it returns a
// *QuorumError whose Kind is ErrLocked, ErrUnavailable, ErrNoValidity,
// ErrSuperseded, ErrNotProvisioned, or one that no retry fixes (ErrWrongType,
// ErrAuth, ErrNoPermission, ErrScript), after releasing the lock on every node that answered; nodes
// that had not answered are released in the background as soon as their
// call ends.
//
// It waits for a majority's answers up to the round's patience (see
// WithNodeTimeout: 5 s with the defaults, when a majority is down or
// paused), or until ctx ends if that comes first. Then too the error is a
// *QuorumError with a Kind (ErrUnavailable when too few nodes had
// answered) and every node's outcome, those still silent NodeTimedOut
// with an Err that wraps ctx's error; ctx's error is its Cause, so
// errors.Is matches it as well. (A refusal that may be this client's own
// release still in flight gives no Kind then: see Lock.)
//
// name must be non-empty, at most MaxNameLength bytes long, and must not
// begin with '}' (see ErrBadName); otherwise TryLock sends nothing and
// returns ErrEmptyName, ErrNameTooLong or ErrBadName, wrapped, not a
// *QuorumError. Lock and Do check names the same way.
func (c *Client) TryLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	ls, err := c.leaseOf(c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if err := c.beforeTry(ctx, name); err != nil {
		return nil, err
	}
	return c.tryLock(ctx, name, "", 0, ls)
}

// beforeTry is what TryLock does before its attempt: it refuses a bad name
// or an ended ctx, and learns the fenced client's node identities.
func (c *Client) beforeTry(ctx context.Context, name string) error {
	if err := validateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &QuorumError{Op: "lock", Name: name, Cause: err}
	}
	return nil
}

// tryLock makes one attempt. waiter identifies a waiting Lock call in the
// lock's queue, and waited is how long it has waited so far (the queue
// prelude); TryLock passes "".
//
// Votes count only from nodes that showed the deployment's identity at
// the check of the node list (internal/identity), which the first attempt waits
// for. The attempt itself is the lease engine's (internal/lease).
func (c *Client) tryLock(ctx context.Context, name, waiter string, waited time.Duration, ls term) (*Lock, error) {
	if err := c.leases.Settle(ctx, name); err != nil {
		return nil, &QuorumError{Op: "lock", Name: name, Cause: err}
	}
	list, err := c.ident.AttemptList(ctx, name)
	if err != nil {
		return nil, err
	}
	if tr := c.cfg.trace; tr != nil && tr.AttemptStart != nil {
		tr.AttemptStart(name)
	}
	lk := &Lock{c: c}
	l := &lk.l
	c.leases.Begin(l, lease.Request{Name: name, Waiter: waiter, Waited: waited,
		Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, List: list, Prefix: c.cfg.keyPrefix, Shape: lease.Mutex})
	start := c.cfg.clock.Now()
	commit, err := l.Acquire(ctx, start, waited)
	err = publicError(err)
	// One report per attempt, however it ended.
	if c.cfg.observer != nil {
		if err != nil {
			c.observe(ctx, "lock", name, start, l.Results(), commit, 0, time.Time{}, err)
		} else {
			c.observe(ctx, "lock", name, start, l.Results(), commit, l.Token(), l.Until(), nil)
		}
	}
	if err != nil {
		return nil, err
	}
	return lk, nil
}
