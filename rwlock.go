package redlock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/waiting"
)

// The read-write lock: many readers or one writer (docs/rwlock.md). Each
// node grants a read where no writer holds the name, none is promised it
// and none waits in its queue unless the reader waited through a writer
// phase (the phase-fair rule), and a write where no writer and no live
// reader holds it; any two majorities meet, so a reader and a writer never
// both hold a majority. Every reader has its own entry and expiry on each
// node. Every grant mints a token: a writer's exceeds every earlier
// reader's and writer's, a later reader's exceeds the writer's, and two
// readers' are in either order.

// RWMutex is the read-write lock called name. It holds no state of its
// own: any number of RWMutex values, in any process, for the same name
// share the lock. A read-write lock and a mutex (Lock) of the same name
// are different locks.
type RWMutex struct {
	c    *Client
	name string
}

// RWMutex returns the read-write lock called name, checked as a lock name
// is (ErrEmptyName, ErrNameTooLong, ErrBadName). It sends nothing.
func (c *Client) RWMutex(name string) (*RWMutex, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	return &RWMutex{c: c, name: name}, nil
}

// Name is the lock's name.
func (m *RWMutex) Name() string { return m.name }

// TryRLock makes one attempt to take a read hold. It is refused
// (ErrLocked) while a writer holds the lock, is promised it, or waits for
// it: a waiting writer blocks new readers, so that readers who keep
// overlapping do not starve it. It never waits, so it never joins a
// reader phase (RLock does). Its other errors are TryLock's.
func (m *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (*RWLock, error) {
	return m.try(ctx, true, opts)
}

// TryLock makes one attempt to take the write hold: refused (ErrLocked)
// while a writer or a live reader holds the lock. Its errors are
// TryLock's.
func (m *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (*RWLock, error) {
	return m.try(ctx, false, opts)
}

func (m *RWMutex) try(ctx context.Context, reader bool, opts []LockOption) (*RWLock, error) {
	ls, err := m.c.leaseOf(m.c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if l, err := m.held(ctx, reader, ls.reentrant); l != nil || err != nil {
		return l, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &QuorumError{Op: "lock", Name: m.name, Cause: err}
	}
	return m.attempt(ctx, reader, "", 0, ls)
}

// RLock takes a read hold, retrying until it gets one, ctx ends, or an
// outage outlasts the client's bound, as LockMulti does. Readers do not
// wait in the writers' queue, but the lock is phase-fair: a reader refused
// while a writer holds the lock, is promised it or waits for it is
// admitted when that writer phase ends (the holder's Unlock or
// Downgrade), ahead of the writers still queued, so it waits for one
// writer phase at most; a writer waits for the writers ahead of it, in
// their order, and for one reader phase more than there are of them at
// most: the one in progress when it queued, and one after each of their
// holds (docs/rwlock.md, Phase-fair). A refused reader
// hears the writer's releases: an Unlock that begins a reader phase wakes
// every waiting reader at once; otherwise it retries after the client's
// retry delay.
func (m *RWMutex) RLock(ctx context.Context, opts ...LockOption) (*RWLock, error) {
	ls, err := m.c.leaseOf(m.c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if l, err := m.held(ctx, true, ls.reentrant); l != nil || err != nil {
		return l, err
	}
	var l *RWLock
	key := lease.RWKey(m.c.cfg.keyPrefix, m.name)
	phase, wait, seen := lease.PhaseKeys(key)
	keys := nodescript.BoxKeys(key, lease.NextKey(key), lease.QueueKey(key), lease.SeenKey(key),
		lease.ReadersKey(key), phase, wait, seen)
	leave := func(reader string) *nodescript.Call {
		return nodescript.NewCall(nodescript.RWLeave, keys, reader, m.c.promiseFor())
	}
	err = waiting.Retry(ctx, m.c.wait, m.name, waiting.Watch{Keys: []string{key}, Leave: leave}, func(reader string, _ time.Duration) (err error) {
		l, err = m.attempt(ctx, true, reader, 0, ls)
		return err
	})
	return l, err
}

// Lock takes the write hold, waiting in the lock's queue as Client.Lock
// does: queued writers are handed the lock in arrival order, and block new
// readers meanwhile.
func (m *RWMutex) Lock(ctx context.Context, opts ...LockOption) (*RWLock, error) {
	ls, err := m.c.leaseOf(m.c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if l, err := m.held(ctx, false, ls.reentrant); l != nil || err != nil {
		return l, err
	}
	key := lease.RWKey(m.c.cfg.keyPrefix, m.name)
	return waiting.InLine(ctx, m.c.wait, m.name, lockLine(key), func(ctx context.Context, waiter string, waited time.Duration) (*RWLock, error) {
		return m.attempt(ctx, false, waiter, waited, ls)
	})
}

// attempt is one acquisition of a read or write hold.
func (m *RWMutex) attempt(ctx context.Context, reader bool, waiter string, waited time.Duration, ls term) (*RWLock, error) {
	c := m.c
	l := &RWLock{c: c}
	l.reading.Store(reader)
	start, commit, begun, err := c.leases.Attempt(ctx, &l.l, lease.Request{Name: m.name, Names: []string{lease.RWSettleName(m.name)}, Waiter: waiter, Waited: waited,
		Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, Prefix: c.cfg.keyPrefix, Shape: lease.RW(reader)})
	err = publicError(err)
	if begun && c.cfg.observer != nil {
		if err != nil {
			c.observe(ctx, "lock", m.name, start, l.l.Results(), commit, 0, time.Time{}, err)
		} else {
			c.observe(ctx, "lock", m.name, start, l.l.Results(), commit, l.Token(), l.Until(), nil)
		}
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Do takes the write hold (Lock), runs fn while holding it, extending it
// every TTL/3, and releases it when fn returns, as Client.Do does.
func (m *RWMutex) Do(ctx context.Context, fn func(ctx context.Context, l *RWLock) error, opts ...LockOption) error {
	return m.do(ctx, false, fn, opts)
}

// DoRead takes a read hold (RLock) and runs fn as Do does.
func (m *RWMutex) DoRead(ctx context.Context, fn func(ctx context.Context, l *RWLock) error, opts ...LockOption) error {
	return m.do(ctx, true, fn, opts)
}

func (m *RWMutex) do(ctx context.Context, reader bool, fn func(ctx context.Context, l *RWLock) error, opts []LockOption) error {
	if fn == nil {
		return ErrNilFunc
	}
	take := m.Lock
	if reader {
		take = m.RLock
	}
	l, err := take(ctx, opts...)
	if err != nil {
		return err
	}
	root := l.root()
	keep := root.holds.keepAlive(&root.l, func(ctx context.Context) error { return root.Extend(ctx) })
	return hold(ctx, keep, l.Unlock, func(ctx context.Context) error { return fn(l.Context(ctx), l) })
}

// held is what a context that carries a hold of this lock from this client
// makes of a new one: with Reentrant, a new handle on that hold when it is
// of the kind asked (a reader's reentry does not queue again behind a
// waiting writer, which would wait for it); ErrUpgrade for a write hold
// under a read hold, ErrReadUnderWrite for a read hold under a write hold,
// and without Reentrant ErrHeldByContext, as each would wait for itself.
// It returns nil, nil if ctx carries no live hold of this lock.
func (m *RWMutex) held(ctx context.Context, reader, reentrant bool) (*RWLock, error) {
	for h := heldIn[*RWLock](ctx); h != nil; h = h.next {
		l := h.lock.root()
		if l.c != m.c || l.Name() != m.name {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, &QuorumError{Op: "lock", Name: m.name, Cause: err}
		}
		live := !l.l.Released() && !isClosed(l.Done())
		switch {
		case reentrant && reader == l.Reading():
			if why := l.holds.add(&l.l); why != nil {
				return nil, &QuorumError{Op: "lock", Name: m.name, Kind: why}
			}
			r := &RWLock{c: l.c, outer: l}
			return r, nil
		case !live:
		case !reader && l.Reading():
			return nil, fmt.Errorf("%w: %q is held for reading through this context", ErrUpgrade, m.name)
		case reader && !l.Reading():
			return nil, fmt.Errorf("%w: %q is held for writing through this context", ErrReadUnderWrite, m.name)
		default:
			return nil, fmt.Errorf("%w: %q", ErrHeldByContext, m.name)
		}
	}
	return nil, nil
}

// RWLock is a read or write hold of a read-write lock on a majority of the
// nodes. Its methods are safe for concurrent use.
type RWLock struct {
	c       *Client
	l       lease.Lease
	reading atomic.Bool
	outer   *RWLock // a reentry's handle: the hold that acquired
	holds   holds   // reentrancy, as Lock's (reentrant.go)
}

// root is the hold that acquired l's lease, and lease that lease.
func (l *RWLock) root() *RWLock {
	if l.outer != nil {
		return l.outer
	}
	return l
}

func (l *RWLock) lease() *lease.Lease { return &l.root().l }

// Name is the lock's name.
func (l *RWLock) Name() string { return l.lease().Name() }

// Reading tells a read hold (RLock, or a write hold downgraded) from a
// write hold.
func (l *RWLock) Reading() bool { return l.root().reading.Load() }

// Token is the hold's fencing token: a writer's exceeds the token of
// every reader and writer that held the lock before it; a reader's
// exceeds every earlier writer's. Readers' tokens are in no order among
// themselves. A downgrade keeps the writer's token. 0 without fencing.
func (l *RWLock) Token() uint64 { return l.lease().Token() }

// ID returns the hold's id: the random value it holds on the nodes, one per
// acquisition (a reentrant hold shares its outer hold's). Inspect shows it
// as Holder: log it beside your process's identity, and an operator can
// tell from Inspect which process holds a name. The scripts release and
// extend only the value they are given, so keep it out of places others
// who can reach the nodes could read it from.
func (l *RWLock) ID() string { return l.lease().Value() }

// Until is the end of the hold's validity, as Lock.Until.
func (l *RWLock) Until() time.Time { return l.lease().Until() }

// Done closes when the hold's validity ends without a successful Extend,
// or at Unlock, as Lock.Done.
func (l *RWLock) Done() <-chan struct{} { return l.lease().Done() }

// Nodes returns what each node answered to the acquisition.
func (l *RWLock) Nodes() []NodeResult { return append([]NodeResult(nil), l.lease().Results()...) }

// Extend re-applies the hold's TTL, as Lock.Extend does: a reader's
// renews its own entry only, never another reader's.
func (l *RWLock) Extend(ctx context.Context, opts ...LockOption) error {
	if l.outer != nil && l.outer.holds.unlocked(&l.holds) {
		return &QuorumError{Op: "extend", Name: l.Name(), Kind: ErrReleased}
	}
	return l.c.extend(ctx, l.lease(), opts)
}

// Unlock releases the hold, as Lock.Unlock does. The last reader to leave
// hands the lock to the first queued writer. A hold reentered (Reentrant)
// is released by its outermost handle's Unlock, as Lock's is.
func (l *RWLock) Unlock(ctx context.Context) error {
	if l.root().holds.countDown(&l.holds, l.outer == nil) {
		return l.c.release(ctx, l.lease())
	}
	return nil
}

// Downgrade turns a write hold into a read hold, keeping its token and its
// validity, in one step on each node: no other writer can take the lock in
// between, and the holder leaves the writers' queue. It succeeds once a
// majority has turned it; on a node where it did not land the hold stays a
// writer's until Unlock, which releases either.
//
// From the call on, the hold is a read hold, whatever the result: a call
// that failed may still land on the nodes it reached (a paused node runs it
// when it resumes), and let readers in. Do not write after calling it.
// ErrExpired: the write hold was no longer held on a majority, or its
// validity had ended; ErrReleased: it was unlocked; ErrDowngradeReentered:
// it has open reentries (Reentrant), whose frames still write, or this is
// one. A read hold's Downgrade does nothing.
func (l *RWLock) Downgrade(ctx context.Context) error {
	if l.outer != nil {
		return fmt.Errorf("%w: %q (a reentry)", ErrDowngradeReentered, l.Name())
	}
	if l.reading.Load() {
		return nil
	}
	l.holds.mu.Lock()
	open := l.holds.extra > 0
	l.holds.mu.Unlock()
	switch {
	case open:
		return fmt.Errorf("%w: %q", ErrDowngradeReentered, l.Name())
	case l.l.Released():
		return &QuorumError{Op: "downgrade", Name: l.Name(), Kind: ErrReleased}
	case isClosed(l.l.Done()) || l.l.Remaining() <= 0:
		return &QuorumError{Op: "downgrade", Name: l.Name(), Kind: ErrExpired}
	}
	l.reading.Store(true) // see above: any node the call reaches may let readers in
	return publicError(l.c.leases.Downgrade(ctx, &l.l))
}

// Upgrade is refused: a read hold cannot become a write hold in place
// (two readers upgrading at once would each wait for the other to leave).
// Unlock, then Lock. It returns ErrUpgrade.
func (l *RWLock) Upgrade(context.Context) error {
	return fmt.Errorf("%w: %q", ErrUpgrade, l.Name())
}

// Context returns a copy of ctx that carries l: a write hold of the same
// lock through it (or a context derived from it) is refused with
// ErrUpgrade while l is a read hold, where it would wait for itself. Do
// and DoRead give fn such a context.
func (l *RWLock) Context(ctx context.Context) context.Context { return withHeld(ctx, l) }
