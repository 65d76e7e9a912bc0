package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/waiting"
	"github.com/redis/go-redis/v9"
)

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
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	chosen := free[:min(n, len(free))]
	// Too few look free: try anyway, on slots chosen at random, so that a
	// waiter joins the line, or finds the ones the census missed.
	for _, i := range rand.Perm(z.k) {
		if len(chosen) == n {
			break
		}
		if !slices.Contains(chosen, i) {
			chosen = append(chosen, i)
		}
	}
	slices.Sort(chosen)
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

// trySlots is one attempt on slots, sorted.
func (s *Semaphore) trySlots(ctx context.Context, z semSize, slots []int, ls term, waiter string, waited time.Duration) (*Permit, error) {
	c := s.c
	p := &Permit{c: c, slots: slots}
	var names []string
	if len(slots) > 1 {
		names = lease.SlotNames(s.name, slots)
	}
	name := lease.PermitName(s.name, slots)
	start, commit, begun, err := c.leases.Attempt(ctx, &p.l, lease.Request{Name: name, Waiter: waiter, Waited: waited,
		Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, Prefix: c.cfg.keyPrefix, Shape: lease.Permit(s.name, slots, z.k, z.version), Names: names})
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
// and returns the slots other than tried (-1: none) that a majority may
// still grant, from tried on: those held on at most N - majority of the
// nodes that answered. (Counting the free ones among those that answered
// would pass over a slot this client just released, its release still on
// its way to one of them.) It returns none if too few nodes granted the
// read, and a *QuorumError if too few answered at all (Kind
// ErrUnavailable) or ctx ended (Cause ctx's error).
func (s *Semaphore) freeSlots(ctx context.Context, k, tried int) ([]int, error) {
	c := s.c
	keys := make([]any, k)
	for i := range keys {
		keys[i], _, _ = lease.LockKeys(c.cfg.keyPrefix, lease.SlotName(s.name, i))
	}
	call := nodescript.NewCall(nodescript.Census, keys)
	var mu sync.Mutex
	held := make([]int, k)
	op := func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		on, err := call.Run(ctx, node).Int64Slice()
		if err != nil || len(on) != k {
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
	t, err := c.rounds.Run(ctx, round.Spec{Name: "census", Op: op}, (*round.Tally).Decided, nil)
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
	mu.Lock()
	defer mu.Unlock()
	most := len(c.nodes) - round.Majority(len(c.nodes))
	var out []int
	for j := range k {
		if i := (tried + 1 + j) % k; i != tried && held[i] <= most {
			out = append(out, i)
		}
	}
	return out, nil
}

// line is the semaphore's line for requests of n permits. A waiter that
// gives up leaves it and wakes those behind it that the free slots can
// now serve: they may have been held back only by it.
func (s *Semaphore) line(n int) waiting.Line {
	c := s.c
	key := lease.LineKey(c.cfg.keyPrefix, s.name)
	keys := []any{lease.QueueKey(key), lease.SeenKey(key)}
	k := s.Permits()
	for i := range k {
		k, _, _ := lease.LockKeys(c.cfg.keyPrefix, lease.SlotName(s.name, i))
		keys = append(keys, k)
	}
	return waiting.Line{Key: key, Suffix: lease.LineWaiter("", n), Yield: yieldKeys(key), Leave: func(waiter string) *nodescript.Call {
		return nodescript.NewCall(nodescript.SemLeave, keys, waiter, k, key, c.promiseFor())
	}}
}
