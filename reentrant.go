package redlock

import (
	"context"
	"sync"

	"github.com/quorumlock/redlock/internal/lease"
)

// Reentrancy, opt-in (docs/reentrancy.md): a lock held through a context
// may be taken again through it. It is scoped by the context, never by the
// goroutine, and counted on the client, never on the nodes: a count per
// node diverges when an increment reaches only some of them. A reentry
// sends nothing: it has the lock's token, Until and Done, and never
// shortens (or lengthens) the lease.

// Reentrant makes TryLock, Lock or Do reenter the lock of the same name
// that ctx holds, through the same Client, instead of acquiring it again:
// a ctx from Lock.Context, or the context Do gives its function (and any
// context derived from either). The reentry returns at once with a new
// handle on the same lock: the same token, Until and Done. Its TTL option,
// if any, is ignored: the lease stays as it is. Unlocking a handle counts
// one hold down, and the Unlock that ends the last hold releases the
// lock, so in nested use the outermost one. A reentry of a lock whose
// validity has ended fails with ErrExpired, of a lock already released
// with ErrReleased (a *QuorumError); a ctx that holds no lock of that
// name acquires as without Reentrant.
//
// Without Reentrant a Lock through a context that holds the name waits
// for itself, as sync.Mutex does, until ctx ends or the lock expires.
// Extend refuses Reentrant (ErrNotForExtend).
func Reentrant() LockOption { return func(ls *term) { ls.reentrant = true } }

// holds counts the holds of a Lock, on the Lock that acquired it; every
// handle's counted flag is guarded by that Lock's mu too.
type holds struct {
	mu       sync.Mutex
	extra    int  // reentries whose handle has not been unlocked
	ended    bool // the last hold was unlocked: the lock is released
	watched  bool // a Do keeps the lease alive
	counted  bool // this handle's Unlock counted down
	releaser bool // this handle's Unlock ended the last hold
}

// root is the Lock that acquired l's lease.
func (l *Lock) root() *Lock {
	if l.outer != nil {
		return l.outer
	}
	return l
}

// lease is the lease l holds (its root's).
func (l *Lock) lease() *lease.Lease { return &l.root().l }

// countDown counts l's hold down, once, and reports whether it was the
// last (also on later calls from the handle whose Unlock it was).
func (l *Lock) countDown() bool {
	h := &l.root().holds
	h.mu.Lock()
	defer h.mu.Unlock()
	if !l.holds.counted {
		l.holds.counted = true
		if h.extra > 0 {
			h.extra--
		} else {
			h.ended, l.holds.releaser = true, true
		}
	}
	return l.holds.releaser
}

// Context returns a copy of ctx that carries l, for a Reentrant TryLock,
// Lock or Do through it (or a context derived from it).
func (l *Lock) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, heldKey{}, &held{lock: l, next: heldIn(ctx)})
}

// heldKey is the context key of the locks a context holds.
type heldKey struct{}

// held is a list of the locks a context holds, innermost first.
type held struct {
	lock *Lock
	next *held
}

func heldIn(ctx context.Context) *held {
	h, _ := ctx.Value(heldKey{}).(*held)
	return h
}

// reentry returns a new hold of the lock of name that ctx holds through
// c, or nil, nil if it holds none.
func (c *Client) reentry(ctx context.Context, name string) (*Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, &QuorumError{Op: "lock", Name: name, Cause: err}
	}
	for h := heldIn(ctx); h != nil; h = h.next {
		if l := h.lock.root(); l.c == c && l.Name() == name {
			return l.reenter()
		}
	}
	return nil, nil
}

// reenter adds a hold to l, the root: a handle of its own, on l's lease.
func (l *Lock) reenter() (*Lock, error) {
	h := &l.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	var why error
	switch {
	case h.ended || l.l.Released():
		why = ErrReleased
	case l.l.Remaining() <= 0 || isClosed(l.l.Done()):
		why = ErrExpired
	default:
		h.extra++
		return &Lock{c: l.c, outer: l}, nil
	}
	return nil, &QuorumError{Op: "lock", Name: l.Name(), Kind: why}
}

// watch marks l's root as kept alive by a Do, and reports whether one
// already kept it (a nested Do then starts no second watchdog); unwatch
// undoes it.
func (l *Lock) watch() (already bool) {
	h := &l.root().holds
	h.mu.Lock()
	defer h.mu.Unlock()
	already, h.watched = h.watched, true
	return already
}

func (l *Lock) unwatch() {
	h := &l.root().holds
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watched = false
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
