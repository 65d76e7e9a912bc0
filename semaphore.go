package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
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

// TryAcquire makes one attempt to take a permit: it tries a slot chosen at
// random and, if another holder has it, asks the nodes which slots are free
// and tries those, one at a time, until one is granted. It never holds two
// slots for one call. It fails with ErrLocked when every slot is held,
// and otherwise as TryLock does, or with ErrPermits (no retry fixes it).
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...LockOption) (*Permit, error) {
	ls, err := s.c.leaseOf(s.c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &QuorumError{Op: "lock", Name: s.name, Cause: err}
	}
	return s.tryAcquire(ctx, ls)
}

func (s *Semaphore) tryAcquire(ctx context.Context, ls term) (*Permit, error) {
	first := rand.N(s.permits)
	p, err := s.trySlot(ctx, first, ls)
	var qe *QuorumError
	if err == nil || !errors.As(err, &qe) || !contended(qe) {
		return p, err
	}
	for _, i := range s.freeSlots(ctx, first) {
		p, err2 := s.trySlot(ctx, i, ls)
		if err2 == nil || !errors.As(err2, &qe) || !contended(qe) {
			return p, err2
		}
	}
	qe.Name = s.name // every slot tried is held: the semaphore is full
	return nil, qe
}

// Acquire takes a permit, retrying until it gets one, ctx ends, or an
// outage outlasts the client's bound (WithMaxOutage), and gives up at once
// on the errors Lock gives up on and on ErrPermits. It retries after the
// client's retry delay: waiters are not queued, so a permit given back
// goes to whichever waiter tries first, not to the one that waited
// longest (docs/semaphore.md).
func (s *Semaphore) Acquire(ctx context.Context, opts ...LockOption) (*Permit, error) {
	ls, err := s.c.leaseOf(s.c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	var p *Permit
	err = s.c.retry(ctx, s.name, func() (err error) {
		p, err = s.tryAcquire(ctx, ls)
		return err
	})
	return p, err
}

// Do takes a permit (Acquire), runs fn while holding it, extending it
// every TTL/3, and releases it when fn returns, as Client.Do does for a
// lock: fn's context is cancelled with ErrLockLost when the permit cannot
// be kept.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context, p *Permit) error, opts ...LockOption) error {
	if fn == nil {
		return ErrNilFunc
	}
	p, err := s.Acquire(ctx, opts...)
	if err != nil {
		return err
	}
	return hold(ctx, keepLease(&p.l, p.Extend), p.Release, func(ctx context.Context) error { return fn(ctx, p) })
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

// trySlot is one attempt on slot i.
func (s *Semaphore) trySlot(ctx context.Context, i int, ls term) (*Permit, error) {
	c := s.c
	p := &Permit{c: c, slot: i}
	name := lease.SlotName(s.name, i)
	start, commit, begun, err := c.leases.Attempt(ctx, &p.l, lease.Request{Name: name,
		Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, Prefix: c.cfg.keyPrefix, Shape: lease.Slot(s.name, i, s.permits)})
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

// freeSlots asks every node which slots it holds (one round, read only)
// and returns the slots other than tried that a majority may still grant,
// from tried on: those held on at most N - majority of the nodes that
// answered. (Counting the free ones among those that answered would pass
// over a slot this client just released, its release still on its way to
// one of them.)
func (s *Semaphore) freeSlots(ctx context.Context, tried int) []int {
	c := s.c
	keys := make([]any, s.permits)
	for i := range keys {
		keys[i], _, _ = lease.LockKeys(c.cfg.keyPrefix, lease.SlotName(s.name, i))
	}
	call := nodescript.NewCall(nodescript.Census, keys)
	var mu sync.Mutex
	held := make([]int, s.permits)
	op := func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		on, err := call.Run(ctx, node).Int64Slice()
		if err != nil || len(on) != s.permits {
			return round.NodeFailed, 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, h := range on {
			if h != 0 {
				held[i]++
			}
		}
		return round.NodeGranted, 0, nil
	}
	if _, err := c.rounds.Run(ctx, round.Spec{Name: "census", Op: op}, (*round.Tally).Decided, nil); err != nil {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	most := len(c.nodes) - round.Majority(len(c.nodes))
	var out []int
	for k := 1; k < s.permits; k++ {
		if i := (tried + k) % s.permits; held[i] <= most {
			out = append(out, i)
		}
	}
	return out
}
