package redlock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

// A hold of a read-write lock (rwlock.go): a reader's entry or the
// writer's key on a majority of the nodes.

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
