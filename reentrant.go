package redlock

import (
	"context"
	"fmt"
	"slices"
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
// if any, is ignored: the lease stays as it is. The outermost handle's
// Unlock (the one that acquired) releases the lock, whatever reentries are
// still open; a reentry's Unlock only counts its hold down, and after it
// the reentry's Extend fails with ErrReleased. A reentry of a lock whose
// validity has ended fails with ErrExpired, of a lock already released
// with ErrReleased (a *QuorumError); a ctx that holds no lock of that name
// acquires as without Reentrant.
//
// Without Reentrant, a Lock (or Do) through a context that holds the name
// fails at once with ErrHeldByContext, where it would wait for itself
// until ctx ended or the lock expired; a TryLock is refused by the nodes
// (ErrLocked), as it is for any held lock. Extend refuses Reentrant
// (ErrNotForExtend).
func Reentrant() LockOption { return func(ls *term) { ls.reentrant = true } }

// holds counts the holds of a Lock, on the Lock that acquired it, and
// keeps the one watchdog its Do calls share; every handle's counted flag
// is guarded by that Lock's mu too.
type holds struct {
	mu       sync.Mutex
	extra    int  // reentries whose handle has not been unlocked
	ended    bool // the outermost hold was unlocked: the lock is released
	counted  bool // this handle's Unlock counted down
	releaser bool // this handle's Unlock released the lock

	// The Do calls running on the lock: the first starts the watchdog, the
	// last to return stops it, and a lost lock cancels every one's fn.
	watchers  map[*watcher]struct{}
	stopWatch func()
}

// watcher is one Do's fn context, as the shared watchdog cancels it.
type watcher struct{ cancel context.CancelCauseFunc }

// root is the Lock that acquired l's lease.
func (l *Lock) root() *Lock {
	if l.outer != nil {
		return l.outer
	}
	return l
}

// lease is the lease l holds (its root's).
func (l *Lock) lease() *lease.Lease { return &l.root().l }

// countDown counts l's hold down, once, and reports whether it released
// the lock: the outermost handle's does (also on later calls from it).
func (l *Lock) countDown() bool { return l.root().holds.countDown(&l.holds, l.outer == nil) }

// countDown counts the hold of the handle whose own holds are own down,
// on h, its root's: once per handle. The root's (outermost) Unlock ends
// the lock; it reports whether own's did.
func (h *holds) countDown(own *holds, outermost bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !own.counted {
		own.counted = true
		if outermost {
			h.ended, own.releaser = true, true
		} else {
			h.extra--
		}
	}
	return own.releaser
}

// unlocked reports whether the handle whose own holds are own has counted
// down, on h, its root's.
func (h *holds) unlocked(own *holds) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return own.counted
}

// keepAlive is the keep-alive of a Do on the lease l whose root holds are
// h: the Do joins the lock's one watchdog, which the first Do starts
// (extending with extend) and the last to leave stops; when the lock is
// lost it cancels every joined Do's fn. Sibling Dos through one context
// each keep the lock alive as long as any runs.
func (h *holds) keepAlive(l *lease.Lease, extend func(context.Context) error) func(context.Context, context.CancelCauseFunc) func() {
	return func(fnCtx context.Context, cancel context.CancelCauseFunc) func() {
		w := &watcher{cancel: cancel}
		h.mu.Lock()
		if h.watchers == nil {
			h.watchers = map[*watcher]struct{}{}
		}
		h.watchers[w] = struct{}{}
		if h.stopWatch == nil {
			h.stopWatch = l.KeepAlive(fnCtx, h.cancelAll, extend)
		}
		h.mu.Unlock()
		return func() {
			h.mu.Lock()
			delete(h.watchers, w)
			var stop func()
			if len(h.watchers) == 0 {
				stop, h.stopWatch = h.stopWatch, nil
			}
			h.mu.Unlock()
			if stop != nil {
				stop()
			}
		}
	}
}

// cancelAll cancels every joined Do's fn with cause.
func (h *holds) cancelAll(cause error) {
	h.mu.Lock()
	ws := make([]*watcher, 0, len(h.watchers))
	for w := range h.watchers {
		ws = append(ws, w)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.cancel(cause)
	}
}

// add adds a hold on h, a root's, whose lease is l; or says why not:
// ErrReleased, or ErrExpired once l's validity has ended.
func (h *holds) add(l *lease.Lease) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.ended || l.Released():
		return ErrReleased
	case l.Remaining() <= 0 || isClosed(l.Done()):
		return ErrExpired
	}
	h.extra++
	return nil
}

// Context returns a copy of ctx that carries l, for a Reentrant TryLock,
// Lock or Do through it (or a context derived from it).
func (l *Lock) Context(ctx context.Context) context.Context { return withHeld(ctx, l) }

// heldKey is the context key of the holds of one kind (*Lock, *RWLock) a
// context carries.
type heldKey[T any] struct{}

// held lists the holds of one kind a context carries, innermost first.
type held[T any] struct {
	lock T
	next *held[T]
}

// withHeld returns a copy of ctx that carries l too.
func withHeld[T any](ctx context.Context, l T) context.Context {
	return context.WithValue(ctx, heldKey[T]{}, &held[T]{lock: l, next: heldIn[T](ctx)})
}

// heldIn is the list of holds of kind T that ctx carries.
func heldIn[T any](ctx context.Context) *held[T] {
	h, _ := ctx.Value(heldKey[T]{}).(*held[T])
	return h
}

// reentry returns a new hold of the lock of name that ctx holds through
// c, if reentrant; or ErrHeldByContext if not and the hold is live, for a
// waiting Lock (wait), which would wait for itself. It returns nil, nil
// if ctx holds no lock of that name.
func (c *Client) reentry(ctx context.Context, name string, reentrant, wait bool) (*Lock, error) {
	if !reentrant && !wait {
		return nil, nil
	}
	for h := heldIn[*Lock](ctx); h != nil; h = h.next {
		l := h.lock.root()
		if l.c != c || l.Name() != name {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, &QuorumError{Op: "lock", Name: name, Cause: err}
		}
		if reentrant {
			return l.reenter()
		}
		if !l.l.Released() && !isClosed(l.Done()) {
			return nil, fmt.Errorf("%w: %q", ErrHeldByContext, name)
		}
	}
	return nil, nil
}

// noReentry refuses Reentrant for call, an acquisition that has no reentry.
func noReentry(ls term, call string) error {
	if ls.reentrant {
		return fmt.Errorf("%w: given to %s", ErrCannotReenter, call)
	}
	return nil
}

// heldMember is ErrHeldByContext if ctx holds, through c, a live Lock of
// one of names: a waiting multi-lock over them would wait for itself.
func (c *Client) heldMember(ctx context.Context, names []string) error {
	for h := heldIn[*Lock](ctx); h != nil; h = h.next {
		l := h.lock.root()
		if l.c != c || !slices.Contains(names, l.Name()) || l.l.Released() || isClosed(l.Done()) {
			continue
		}
		return fmt.Errorf("%w: %q, a member of the multi-lock", ErrHeldByContext, l.Name())
	}
	return nil
}

// reenter adds a hold to l, the root: a handle of its own, on l's lease.
func (l *Lock) reenter() (*Lock, error) {
	if why := l.holds.add(&l.l); why != nil {
		return nil, &QuorumError{Op: "lock", Name: l.Name(), Kind: why}
	}
	return &Lock{c: l.c, outer: l}, nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
