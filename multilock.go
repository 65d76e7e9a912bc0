package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/waiting"
)

// The multi-lock: several names taken as one lock (docs/multilock.md). On
// each node one script takes every member or none, so a request never holds
// part of its set there and two multi-locks cannot deadlock; across nodes a
// split is the mutex's split vote, rolled back everywhere and retried. Each
// member is the mutex's lock of its name: a MultiLock over "a" and "b"
// excludes a Lock of "a", and its token is committed as each member's.

// MaxMultiNames is the most names one multi-lock may hold.
const MaxMultiNames = 64

// MultiLock is a set of names held together on a majority of the nodes,
// with one validity and one fencing token. Its methods are safe for
// concurrent use.
type MultiLock struct {
	c     *Client
	names []string
	l     lease.Lease
}

// Names returns the lock's names, sorted.
func (m *MultiLock) Names() []string { return slices.Clone(m.names) }

// Nodes returns what each node answered to the acquisition.
func (m *MultiLock) Nodes() []NodeResult { return append([]NodeResult(nil), m.l.Results()...) }

// Until returns the end of the validity of the whole set, as Lock.Until.
func (m *MultiLock) Until() time.Time { return m.l.Until() }

// Done is closed when the set's validity ends without a successful Extend,
// or at Unlock, as Lock.Done: losing any member loses the set.
func (m *MultiLock) Done() <-chan struct{} { return m.l.Done() }

// Token returns the set's fencing token: committed as every member's
// token in one step on each node, it is larger than every token of every
// member committed before, so each member's fence accepts it and then
// refuses every older holder of that member. It is 0 when fencing is off.
func (m *MultiLock) Token() uint64 { return m.l.Token() }

// ID returns the hold's id: the random value it holds on the nodes, one per
// acquisition (a reentrant hold shares its outer hold's). Inspect shows it
// as Holder: log it beside your process's identity, and an operator can
// tell from Inspect which process holds a name. The scripts release and
// extend only the value they are given, so keep it out of places others
// who can reach the nodes could read it from.
func (m *MultiLock) ID() string { return m.l.Value() }

// TryLockMulti makes one attempt to take every one of names, as TryLock
// does for one name: each node grants all of them or none, and the set is
// held when a majority granted it. Its errors are TryLock's. names must
// hold 1 to MaxMultiNames distinct names, each valid as TryLock's
// (ErrNoNames, ErrTooManyNames, ErrDuplicateName, and the name errors,
// wrapped, before anything is sent).
//
// A member name is the mutex of that name: while a Lock of "a" holds it, a
// multi-lock over "a" and "b" is refused (ErrLocked), and the other way
// round. On Cluster or Ring nodes the members must share a hash tag ("t}a",
// "t}b"), else ErrSpansSlots: one script cannot reach several slots there.
func (c *Client) TryLockMulti(ctx context.Context, names []string, opts ...LockOption) (*MultiLock, error) {
	set, err := c.multiNames(names)
	if err != nil {
		return nil, err
	}
	ls, err := c.leaseOf(c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if err := noReentry(ls, "TryLockMulti"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &QuorumError{Op: "lock", Name: lease.MultiName(set), Cause: err}
	}
	return c.tryLockMulti(ctx, set, "", 0, ls)
}

func (c *Client) tryLockMulti(ctx context.Context, set []string, waiter string, waited time.Duration, ls term) (*MultiLock, error) {
	m := &MultiLock{c: c, names: set}
	name := lease.MultiName(set)
	start, commit, begun, err := c.leases.Attempt(ctx, &m.l, lease.Request{Name: name, Waiter: waiter, Waited: waited,
		Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, Prefix: c.cfg.keyPrefix, Shape: lease.Multi(set), Names: set})
	err = publicError(err)
	if begun && c.cfg.observer != nil {
		if err != nil {
			c.observe(ctx, "lock", name, start, m.l.Results(), commit, 0, time.Time{}, err)
		} else {
			c.observe(ctx, "lock", name, start, m.l.Results(), commit, m.Token(), m.Until(), nil)
		}
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// LockMulti takes every one of names, retrying until it succeeds, ctx
// ends, or an outage outlasts the client's bound, and gives up at once on
// the errors Lock gives up on. A refused multi-lock waits in every
// member's queue as one waiter, with one place, beside the members' Lock
// waiters: a member's Unlock promises it to the longest-waiting live
// waiter, the multi-lock included, which is then woken (Redis pub/sub, as
// Lock's waiters are) and takes the set if its other members are free. A
// member it was promised but could not use (another member still held) it
// gives back at once. It is also woken by a member's release promised to
// nobody, and otherwise retries after the client's retry delay (after
// short random delays when its attempt split the votes with another). A
// multi-lock that gives up leaves every member's queue.
//
// Through a context that holds one of names (Lock.Context, Do's fn) it
// fails at once with ErrHeldByContext, where it would wait for itself. A
// multi-lock has no reentry: Reentrant is refused with ErrCannotReenter,
// here and by TryLockMulti and DoMulti.
func (c *Client) LockMulti(ctx context.Context, names []string, opts ...LockOption) (_ *MultiLock, err error) {
	set, err := c.multiNames(names)
	if err != nil {
		return nil, err
	}
	ls, err := c.leaseOf(c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if err := noReentry(ls, "LockMulti"); err != nil {
		return nil, err
	}
	if err := c.heldMember(ctx, set); err != nil {
		return nil, err
	}
	var m *MultiLock
	err = waiting.Retry(ctx, c.wait, lease.MultiName(set), c.multiLine(set), func(waiter string, waited time.Duration) (err error) {
		m, err = c.tryLockMulti(ctx, set, waiter, waited, ls)
		return err
	})
	return m, err
}

// Extend re-applies the set's TTL on every node where every member still
// holds the set's value, as Lock.Extend does: a node counts only if it
// held and extended all of them, so a member lost anywhere fails the
// extension there, and an Extend that fails reports each node's outcome.
func (m *MultiLock) Extend(ctx context.Context, opts ...LockOption) error {
	return m.c.extend(ctx, &m.l, opts)
}

// Unlock releases every member on every node where it still holds the
// set's value, as Lock.Unlock does, and hands each member to its waiting
// Locks. ErrExpired: some member was no longer held on a majority.
func (m *MultiLock) Unlock(ctx context.Context) error { return m.c.release(ctx, &m.l) }

// DoMulti takes every one of names (LockMulti), runs fn while holding
// them, extending the set every TTL/3, and releases them when fn returns,
// as Do does for one name: fn's context is cancelled with ErrLockLost when
// the set cannot be kept.
func (c *Client) DoMulti(ctx context.Context, names []string, fn func(ctx context.Context, m *MultiLock) error, opts ...LockOption) error {
	if fn == nil {
		return ErrNilFunc
	}
	m, err := c.LockMulti(ctx, names, opts...)
	if err != nil {
		return err
	}
	return hold(ctx, keepLease(&m.l, m.Extend), m.Unlock, func(ctx context.Context) error { return fn(ctx, m) })
}

// multiLine is how a waiting multi-lock over set waits: in every member's
// queue, leaving them all if it gives up.
func (c *Client) multiLine(set []string) waiting.Watch {
	keys := make([]string, len(set))
	var queues []any
	for i, n := range set {
		keys[i] = c.lockKey(n)
		queues = append(queues, nodescript.BoxKeys(leaveKeys(keys[i])...)...)
	}
	return waiting.Watch{Keys: keys, Leave: func(waiter string) *nodescript.Call {
		return nodescript.NewCall(nodescript.MultiLeave, queues, waiter)
	}}
}

// multiNames checks a multi-lock's names and returns them sorted: the
// order on the nodes does not matter (each takes all or none), but one
// set has one name in events and errors.
func (c *Client) multiNames(names []string) ([]string, error) {
	switch {
	case len(names) == 0:
		return nil, ErrNoNames
	case len(names) > MaxMultiNames:
		return nil, fmt.Errorf("%w: %d names, at most %d", ErrTooManyNames, len(names), MaxMultiNames)
	}
	set := slices.Clone(names)
	slices.Sort(set)
	for i, n := range set {
		if err := validateName(n); err != nil {
			return nil, err
		}
		if i > 0 && set[i-1] == n {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateName, head(n, 64))
		}
	}
	if err := c.oneSlot(set...); err != nil {
		return nil, err
	}
	return set, nil
}
