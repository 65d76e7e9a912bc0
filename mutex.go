package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/waiting"
)

// Lock is a lock held on a majority of the nodes. Its methods are safe for
// concurrent use.
type Lock struct {
	c *Client
	l lease.Lease // the lease engine's: what the nodes hold, and its deadline
	// Reentrancy (reentrant.go): a reentry's handle points at the Lock
	// that acquired, whose holds count them all.
	outer *Lock
	holds holds
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.lease().Name() }

// Nodes returns what each node answered to the acquisition.
func (l *Lock) Nodes() []NodeResult { return append([]NodeResult(nil), l.lease().Results()...) }

// Until returns the end of the lock's validity, on the client's monotonic
// clock: compare it with time.Now(), not with a wall-clock time from
// elsewhere. It is start + TTL - drift, start being read before the
// acquisition's first request was sent, TTL being the lock's (For, or the
// client's WithTTL). A successful Extend moves it to the same bound counted
// from the start of the Extend call, with the TTL the Extend applied.
func (l *Lock) Until() time.Time { return l.lease().Until() }

// Done returns a channel that is closed when the lock's validity ends
// without a successful Extend, or when the lock is unlocked. Once closed,
// the lock cannot be extended.
//
// It closes a margin before Until: 2% of the lock's TTL, at least 20 ms,
// and at most a tenth of the TTL.
// Timers fire late, by about a millisecond on a loaded machine and by tens
// of milliseconds on a saturated one (measured on 2 cores: up to 15-22 ms
// for a signal to reach a child process), and code that stops on Done
// (Do's function, whose context it cancels, and `redlock exec`'s command,
// which it signals) must have stopped before the validity ends, not just
// begun to.
func (l *Lock) Done() <-chan struct{} { return l.lease().Done() }

// Token returns the lock's fencing token: larger than the token of every
// acquisition of the same name that returned before this one began, and
// larger than every token committed before this lock was granted (see
// docs/fencing.md for the exact guarantees). Pass it to the protected
// resource with every operation. It is 0 when fencing is off.
func (l *Lock) Token() uint64 { return l.lease().Token() }

// ID returns the hold's id: the random value it holds on the nodes, one per
// acquisition (a reentrant hold shares its outer hold's). Inspect shows it
// as Holder: log it beside your process's identity, and an operator can
// tell from Inspect which process holds a name. The scripts release and
// extend only the value they are given, so keep it out of places others
// who can reach the nodes could read it from.
func (l *Lock) ID() string { return l.lease().Value() }

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
	if l, err := c.reentry(ctx, name, ls.reentrant, false); l != nil || err != nil {
		return l, err
	}
	return c.tryLock(ctx, name, "", 0, ls)
}

// Lock acquires the lock called name, retrying until it succeeds, ctx
// ends, or an outage outlasts the client's bound. It gives up at once on
// errors that retrying cannot fix (ErrWrongType, ErrNotProvisioned,
// ErrWrongNodeList, ErrAuth, ErrNoPermission, ErrScript, ErrFencingNode,
// ErrClosed, and the name errors of TryLock, found before any attempt).
// While another owner holds the lock it waits until ctx ends; the error is
// then the last attempt's *QuorumError with ctx's error as its Cause. When
// its attempts have failed for other reasons than contention (nodes down,
// paused, full or read-only, too few answering) for the client's
// WithMaxOutage bound (DefaultMaxOutage, 15 s), with no attempt lost to
// another owner in between, it returns the last attempt's *QuorumError,
// whose Kind says why (ErrUnavailable, say), whose Nodes give every node's
// cause, and whose GaveUpAfter says how long the attempts had failed.
// While attempts fail so, it logs a warning
// with each node's cause through the client's logger (WithLogger), at most
// one per lock name every 5 seconds; a successful attempt logs nothing.
// Its pauses between such attempts double each time, up to a second, so
// that waiters do not keep an overloaded node or machine overloaded.
//
// A waiting Lock joins the lock's queue on the nodes, and Unlock promises
// the lock to the longest-waiting live waiter for a moment (two node
// timeouts), so contended locks pass in arrival order rather than to
// whoever's attempt lands first. The promised waiter is woken by a release
// notification (Redis pub/sub, one connection per node shared by the
// client's waiters); the others sleep on. A waiter that misses its
// notification retries after a random delay within the configured bounds,
// and a promise nobody takes expires (the waiter it was made to, if it does
// not try again, loses its place at the next release). Waiters that came at
// the same moment may be promised the lock on different nodes, so that none
// can take it; they give their promises back, and try again, the oldest
// first. TryLock
// does not queue, and is refused while the lock is promised to a waiter.
func (c *Client) Lock(ctx context.Context, name string, opts ...LockOption) (_ *Lock, err error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	ls, err := c.leaseOf(c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if l, err := c.reentry(ctx, name, ls.reentrant, true); l != nil || err != nil {
		return l, err
	}
	return waiting.InLine(ctx, c.wait, name, lockLine(c.lockKey(name)), func(ctx context.Context, waiter string, waited time.Duration) (*Lock, error) {
		return c.tryLock(ctx, name, waiter, waited, ls)
	})
}

// The mutex: a lock held by one owner at a time. Its lease is the lease
// engine's (internal/lease), with the mutex's shape (lease.Mutex): one key
// per name on each node, holding the owner's random value.

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
	lk := &Lock{c: c}
	l := &lk.l
	start, commit, begun, err := c.leases.Attempt(ctx, l, lease.Request{Name: name, Waiter: waiter, Waited: waited,
		Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, Prefix: c.cfg.keyPrefix, Shape: lease.Mutex})
	err = publicError(err)
	// One report per attempt that began, however it ended.
	if begun && c.cfg.observer != nil {
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
// An Extend that shortens the TTL shortens it on each node as its call
// runs there, before the Extend has heard from a majority, and even if it
// then fails (or runs after it gave up on that node): so Until moves back
// to where its success would put it, if that is earlier, before its first
// call is sent, and Done closes by it. Such a call can also land after a
// later Extend succeeded, and cut that one short on its node: so an Extend
// counts each node that granted it for no longer than the shortest TTL of
// this lease's extension calls to that node whose reply had not come when
// it began, and Until is what a majority of them keep. Until may then be nearer than
// the TTL asked for (never later than the nodes hold the lock); Extends
// that repeat one TTL, as Do's keep-alive does, are never cut.
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
	if l.outer != nil && l.outer.holds.unlocked(&l.holds) {
		return &QuorumError{Op: "extend", Name: l.Name(), Kind: ErrReleased}
	}
	return l.c.extend(ctx, l.lease(), opts)
}

// Unlock deletes the lock on every node where it still holds this lock's
// value, and closes Done. The release is sent even if ctx is already done:
// ctx bounds only how long Unlock waits for the answers. Nodes that cannot
// be reached are retried in the background for up to one TTL.
//
// Unlock returns once the outcome is decided, without waiting for the
// slowest nodes: their calls go on in the background. Another
// client that tries the name at once may still be refused by such a node,
// and win or lose by the others as with any contention; this client's own
// next attempt on the name sends its call to each node only after the
// release's call there has ended, so it is never refused for this lock's
// old value (its majority waits for those releases, not its failure).
//
// It returns nil if a majority deleted the lock. It returns a *QuorumError
// with Kind ErrExpired if the lock was no longer held on a majority: the
// critical section may have overlapped another holder. ErrUnavailable means
// too few nodes answered to tell, within the round's patience (see
// WithNodeTimeout) or before ctx ended; in the last case ctx's error is
// its Cause and the silent nodes are NodeTimedOut with an Err that wraps
// it. Later calls return the first call's result.
//
// A lock reentered (Reentrant) has a handle per hold: the outermost
// handle's Unlock (the one that acquired) releases the lock, returning
// what is said above, whatever reentries are still open; a reentry's
// Unlock only counts its hold down and returns nil.
func (l *Lock) Unlock(ctx context.Context) error {
	if l.countDown() {
		return l.root().release(ctx)
	}
	return nil
}

// release releases the lease on the nodes.
func (l *Lock) release(ctx context.Context) error { return l.c.release(ctx, &l.l) }
