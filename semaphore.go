package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// The semaphore: at most K holders, as K slot locks on the quorum
// (docs/semaphore.md). Permit i is the mutex of "<name>#<i>", so each slot
// is mutually exclusive by the mutex's proof, a crashed holder's permit
// comes back when its lease expires, and each slot has its own token order
// for the fence. A count per node would over-grant under a majority quorum
// (N=3, K=2: three holders). K is stored on the nodes and checked by every
// acquisition.

// MaxPermits is the most permits a semaphore may have.
const MaxPermits = 256

// Semaphore hands out at most Permits() permits for one name at a time.
// It holds no state of its own beyond its name and size: any number of
// Semaphore values, in any process, built with the same name and size
// share the permits. Its methods are safe for concurrent use.
type Semaphore struct {
	c       *Client
	name    string
	permits int
}

// Semaphore returns the semaphore called name with permits permits. It
// sends nothing: the first acquisition stores the number on the nodes, and
// an acquisition by a client whose number differs from the stored one
// fails with ErrPermits (see SetPermits to change it). name is checked as
// a lock name, with room for the slot suffix ("#<slot>"). On Cluster or
// Ring nodes the name needs a '}' ("jobs}"), so that its slots and its size
// share a hash tag, else ErrSpansSlots.
func (c *Client) Semaphore(name string, permits int) (*Semaphore, error) {
	if permits < 1 || permits > MaxPermits {
		return nil, fmt.Errorf("%w: %d", ErrBadPermits, permits)
	}
	if err := validateName(lease.SlotName(name, permits-1)); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, ErrEmptyName
	}
	if err := c.oneSlot(lease.SlotName(name, 0), name, lease.SlotName(name, permits-1)); err != nil {
		return nil, err
	}
	return &Semaphore{c: c, name: name, permits: permits}, nil
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits is the number of permits this Semaphore was built with.
func (s *Semaphore) Permits() int { return s.permits }

// TryAcquire makes one attempt to take a permit (TryAcquireN of one).
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...LockOption) (*Permit, error) {
	return s.TryAcquireN(ctx, 1, opts...)
}

// TryAcquireN makes one attempt to take n permits at once, all or none: a
// permit of n slots, held together, with one validity and one token. For
// one permit it tries a slot chosen at random and, if another holder has
// it, asks the nodes which slots are free and tries those, one at a time,
// until one is granted; for several it asks first, and tries n slots that
// a majority may grant. It never holds more than n slots for one call. It
// does not wait in the semaphore's line, and is refused while waiters
// (Acquire) are in line for the free slots. It fails with ErrLocked when
// the slots are held or waited for, and otherwise as TryLock does, with
// ErrPermits (no retry fixes it), or with ErrBadPermits if n is not
// between 1 and the semaphore's permits (nothing sent).
func (s *Semaphore) TryAcquireN(ctx context.Context, n int, opts ...LockOption) (*Permit, error) {
	ls, err := s.request(n, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &QuorumError{Op: "lock", Name: s.name, Cause: err}
	}
	return s.take(ctx, n, ls, "", 0)
}

// Acquire takes a permit, waiting in line (AcquireN of one).
func (s *Semaphore) Acquire(ctx context.Context, opts ...LockOption) (*Permit, error) {
	return s.AcquireN(ctx, 1, opts...)
}

// AcquireN takes n permits at once, all or none, as TryAcquireN does,
// waiting until it gets them, ctx ends, or an outage outlasts the client's
// bound (WithMaxOutage); it gives up at once on the errors Lock gives up
// on, on ErrPermits and on ErrBadPermits.
//
// Waiting is fair: a waiting AcquireN joins the semaphore's line on the
// nodes (one line for the semaphore, not one per slot), and a node lets a
// request take slots only when the waiters ahead of it, with it, ask for
// no more than the slots free there. A release wakes the waiters at the
// head of the line that the free slots can serve, in order (Redis pub/sub,
// as Lock's waiters are woken); the others sleep on. So permits go in
// arrival order, and a request for several permits at the head of the
// line holds back the single ones behind it until enough slots are free:
// it does not starve. A waiter that misses its notification retries after
// the client's retry delay, and one that stopped trying leaves the line
// when its liveness lapses (the retry delay, or a promise period after it
// was woken).
func (s *Semaphore) AcquireN(ctx context.Context, n int, opts ...LockOption) (*Permit, error) {
	ls, err := s.request(n, opts)
	if err != nil {
		return nil, err
	}
	return waitInLine(ctx, s.c, s.name, s.line(n), func(ctx context.Context, waiter string, waited time.Duration) (*Permit, error) {
		return s.take(ctx, n, ls, waiter, waited)
	})
}

// Do takes a permit (Acquire), runs fn while holding it, extending it
// every TTL/3, and releases it when fn returns, as Client.Do does for a
// lock: fn's context is cancelled with ErrLockLost when the permit cannot
// be kept.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context, p *Permit) error, opts ...LockOption) error {
	return s.DoN(ctx, 1, fn, opts...)
}

// DoN is Do for n permits at once (AcquireN).
func (s *Semaphore) DoN(ctx context.Context, n int, fn func(ctx context.Context, p *Permit) error, opts ...LockOption) error {
	if fn == nil {
		return ErrNilFunc
	}
	p, err := s.AcquireN(ctx, n, opts...)
	if err != nil {
		return err
	}
	return hold(ctx, keepLease(&p.l, p.Extend), p.Release, func(ctx context.Context) error { return fn(ctx, p) })
}

// request checks a request for n permits and its options.
func (s *Semaphore) request(n int, opts []LockOption) (term, error) {
	if n < 1 || n > s.permits {
		return term{}, fmt.Errorf("%w: a request for %d of %d", ErrBadPermits, n, s.permits)
	}
	ls, err := s.c.leaseOf(s.c.defaultLease(), opts)
	if err != nil {
		return term{}, err
	}
	// A permit has no reentry: each acquisition takes permits of its own.
	return ls, noReentry(ls, "a semaphore's acquisition")
}

// SetPermits stores permits as the semaphore's size on every node. It is
// the one way to change the size: acquisitions by clients built with
// another number fail with ErrPermits from then on, so build them anew
// with permits. Shrinking drains the slots at and above the new size: they
// are granted no more, and their holders' extensions are refused, so
// within one TTL at most permits permits are held (until then, at most
// the larger number).
//
// It needs every node, as provisioning a new deployment does: a node that
// missed it keeps the old size, and refuses the new one's permits (a
// minority that disagrees only lowers how many node failures the
// semaphore survives). It fails with a *QuorumError of Kind ErrUnavailable
// naming each node's outcome if any node did not store it; run it again
// once they are back, which changes nothing on the nodes that have it.
// Run it again, too, after a node restarted without its data while
// clients built with the old size may still run: the first acquisition
// on an empty node stores its client's size.
func (s *Semaphore) SetPermits(ctx context.Context, permits int) error {
	if permits < 1 || permits > MaxPermits {
		return fmt.Errorf("%w: %d", ErrBadPermits, permits)
	}
	if err := validateName(lease.SlotName(s.name, permits-1)); err != nil {
		return err
	}
	c := s.c
	life := max(c.cfg.retention, 2*c.cfg.ttl).Milliseconds() // as an acquisition keeps it
	call := nodescript.NewCall(nodescript.SetPermits, []any{lease.PermitsKey(c.cfg.keyPrefix, s.name)}, permits, life)
	op := func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		if err := call.Run(ctx, node).Err(); err != nil {
			if strings.HasPrefix(err.Error(), "WRONGTYPE") {
				return round.NodeFailed, 0, kind.WrongType(err)
			}
			return round.NodeFailed, 0, err
		}
		return round.NodeGranted, 0, nil
	}
	t, err := c.rounds.Run(ctx, round.Spec{Name: "set permits", Op: op}, nil, nil)
	if t == nil {
		return err
	}
	if t.Granted() == t.N {
		return nil
	}
	k := ErrUnavailable
	for _, r := range t.Results {
		if errors.Is(r.Err, ErrWrongType) {
			k = ErrWrongType
		}
	}
	return &QuorumError{Op: "set permits", Name: s.name, Kind: k, Cause: err, Nodes: t.Snapshot()}
}
