package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/slots"
	"github.com/quorumlock/redlock/internal/waiting"
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
	c    *Client
	name string
	size atomic.Pointer[semSize] // the size it acquires under, replaced as it learns a later one
}

// semSize is a semaphore's size K at a version: 0 for a size no SetPermits
// wrote (a constructor's), and each SetPermits one more than the highest
// it read (docs/semaphore.md, "The size and its version").
type semSize struct {
	k       int
	version int64
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
	s := &Semaphore{c: c, name: name}
	s.size.Store(&semSize{k: permits})
	return s, nil
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits is the number of permits this Semaphore acquires under: the
// number it was built with, until it learns of a later size (a SetPermits
// through it, Refresh, or a node's refusal that names a later version).
func (s *Semaphore) Permits() int { return s.size.Load().k }

// Version is the version of the size this Semaphore acquires under: 0 for
// the number it was built with, until it learns of a size a SetPermits
// wrote.
func (s *Semaphore) Version() int64 { return s.size.Load().version }

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
	return waiting.InLine(ctx, s.c.wait, s.name, s.line(n), func(ctx context.Context, waiter string, waited time.Duration) (*Permit, error) {
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
	if k := s.Permits(); n < 1 || n > k {
		return term{}, fmt.Errorf("%w: a request for %d of %d", ErrBadPermits, n, k)
	}
	ls, err := s.c.leaseOf(s.c.defaultLease(), opts)
	if err != nil {
		return term{}, err
	}
	// A permit has no reentry: each acquisition takes permits of its own.
	return ls, noReentry(ls, "a semaphore's acquisition")
}

// Taking permits: which slots an attempt tries (internal/slots chooses them).

// take is one attempt at n permits for waiter ("" for TryAcquireN), which
// has waited waited so far. A first attempt at one permit tries a random
// slot, and asks which slots are free only if that one is held: the
// uncontended case costs one round, as a mutex's. Later attempts of a
// waiter, and requests for several permits, ask first: a woken waiter
// whose random slot were still held would lose its turn.
//
// An attempt that a node refused for a later size than this Semaphore's
// (a SetPermits it had not heard of) is made once more under that size,
// which the Semaphore adopts.
func (s *Semaphore) take(ctx context.Context, n int, ls term, waiter string, waited time.Duration) (*Permit, error) {
	p, err := s.takeUnder(ctx, *s.size.Load(), n, ls, waiter, waited)
	var nodes []NodeResult
	if p != nil {
		nodes = p.l.Results()
	}
	if s.learn(err, nodes) && err != nil && errors.Is(err, ErrPermits) {
		if z := *s.size.Load(); n <= z.k {
			return s.takeUnder(ctx, z, n, ls, waiter, waited)
		}
	}
	return p, err
}

// takeUnder is one attempt at n permits of a semaphore of size z.
func (s *Semaphore) takeUnder(ctx context.Context, z semSize, n int, ls term, waiter string, waited time.Duration) (*Permit, error) {
	if n == 1 && waited == 0 {
		first := rand.N(z.k)
		p, err := s.trySlots(ctx, z, []int{first}, ls, waiter, waited)
		if !retryable(err) {
			return p, s.full(err)
		}
		free, cerr := s.freeSlots(ctx, z.k, first)
		if cerr != nil {
			return nil, cerr
		}
		for _, i := range free {
			p, err2 := s.trySlots(ctx, z, []int{i}, ls, waiter, waited)
			if !retryable(err2) {
				return p, s.full(err2)
			}
		}
		return nil, s.full(err)
	}
	free, err := s.freeSlots(ctx, z.k, -1)
	if err != nil {
		// Too few nodes answered the census to grant anything: the
		// attempt is lost to the outage, and WithMaxOutage counts it as
		// one, not as two rounds of waiting (it gave up after 10 s, not
		// Lock's 5 s, with a bound of 2 s and 3 of 5 nodes stopped).
		return nil, err
	}
	chosen := slots.Choose(free, n, z.k)
	p, err := s.trySlots(ctx, z, chosen, ls, waiter, waited)
	return p, s.full(err)
}

// full names the semaphore, not the slots tried, in an attempt's error
// lost to contention: the slots were held, or waited for in the line.
func (s *Semaphore) full(err error) error {
	var qe *QuorumError
	if errors.As(err, &qe) && contended(qe) {
		qe.Name = s.name
	}
	return err
}

// retryable reports an attempt at one slot lost to its holder, which
// another slot may not be: not to the line (waiters ahead have the free
// slots on some node, which would refuse every slot alike) nor to the
// nodes.
func retryable(err error) bool {
	var qe *QuorumError
	return err != nil && errors.As(err, &qe) && qe.Cause == nil && contended(qe) && !qe.lostToPromises && qe.promised == 0
}

// trySlots is one attempt on the slots chosen, sorted.
func (s *Semaphore) trySlots(ctx context.Context, z semSize, chosen []int, ls term, waiter string, waited time.Duration) (*Permit, error) {
	c := s.c
	p := &Permit{c: c, slots: chosen}
	var names []string
	if len(chosen) > 1 {
		names = lease.SlotNames(s.name, chosen)
	}
	name := lease.PermitName(s.name, chosen)
	start, commit, begun, err := c.leases.Attempt(ctx, &p.l, lease.Request{Name: name, Waiter: waiter, Waited: waited,
		Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, Prefix: c.cfg.keyPrefix, Shape: lease.Permit(s.name, chosen, z.k, z.version), Names: names})
	err = publicError(err)
	if begun && c.cfg.observer != nil {
		if err != nil {
			c.observe(ctx, "lock", name, start, p.l.Results(), commit, 0, time.Time{}, err)
		} else {
			c.observe(ctx, "lock", name, start, p.l.Results(), commit, p.Token(), p.Until(), nil)
		}
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// freeSlots returns the slots other than tried (-1: none) that a majority
// may still grant, from a census of the nodes (internal/slots). It returns
// none if too few nodes granted the read, and a *QuorumError if too few
// answered at all (Kind ErrUnavailable) or ctx ended (Cause ctx's error).
func (s *Semaphore) freeSlots(ctx context.Context, k, tried int) ([]int, error) {
	c := s.c
	held, t, err := slots.Census(ctx, c.rounds, c.cfg.keyPrefix, s.name, k)
	switch {
	case t == nil:
		return nil, err // closed
	case err != nil:
		qe := &QuorumError{Op: "lock", Name: s.name, Cause: err, Nodes: t.Snapshot()}
		if lease.FailedBefore(t, err, c.cfg.nodeTimeout) {
			qe.Kind = ErrUnavailable // silent for longer than a node timeout: not just ctx
		}
		return nil, qe
	case t.Answered < t.Majority:
		// Silent, not refusing (a node that answers with an error, a
		// WRONGTYPE key say, leaves the attempt to say so).
		return nil, &QuorumError{Op: "lock", Name: s.name, Kind: ErrUnavailable, Nodes: t.Snapshot()}
	case !t.Won():
		return nil, nil
	}
	return slots.Free(held, len(c.nodes), tried), nil
}
