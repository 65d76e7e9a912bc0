package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// A semaphore's size is stored on every node as (K, version). SetPermits
// writes a version one above the highest a majority holds, to a majority;
// every acquisition carries its Semaphore's (K, version), and a node
// adopts a later version than its own, so a node that missed a SetPermits
// or restarted empty is repaired by the next acquisition that knows the
// later size. A node refuses an acquisition whose K differs from its own
// unless the acquisition's version is later, naming its (K, version), and
// the Semaphore that hears a later version adopts it (docs/semaphore.md).

// SetPermits changes the semaphore's size to permits, for every client
// that uses the name: it reads the size's version from a majority of the
// nodes, and stores permits at the next version on a majority, each node's
// write conditional on holding no later version. This Semaphore adopts
// the new size at once; other Semaphore values of the name adopt it at
// their next acquisition, which a node holding the new version refuses
// (they retry once under the new size), or at Refresh.
//
// Shrinking drains the slots at and above the new size: they are granted
// no more, and their holders' extensions are refused, so within one TTL of
// SetPermits' return at most permits permits are held (until then, at
// most the larger number). This holds while a majority of the nodes keeps
// the new version: a node that restarts empty loses it until an
// acquisition by a client that knows it repairs the node, so two such
// restarts before any such acquisition may let a client that never heard
// of the change take an old slot on a majority (docs/semaphore.md).
//
// It fails with a *QuorumError naming each node's outcome: Kind
// ErrUnavailable if fewer than a majority stored it (run it again: it
// writes a later version), ErrPermits if nodes hold a later version or
// the same version with another size (a concurrent SetPermits: run it
// again to settle), ErrWrongType if the size's key holds another type.
func (s *Semaphore) SetPermits(ctx context.Context, permits int) error {
	if permits < 1 || permits > MaxPermits {
		return fmt.Errorf("%w: %d", ErrBadPermits, permits)
	}
	if err := validateName(lease.SlotName(s.name, permits-1)); err != nil {
		return err
	}
	stored, err := s.read(ctx, "set permits")
	if err != nil {
		return err
	}
	next := semSize{k: permits, version: highest(stored).version + 1}
	c := s.c
	life := max(c.cfg.retention, 2*c.cfg.ttl).Milliseconds() // as an acquisition keeps it
	call := nodescript.NewCall(nodescript.SetPermits, []any{lease.PermitsKey(c.cfg.keyPrefix, s.name)}, next.k, life, next.version)
	op := func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		v, err := call.Run(ctx, node).Int64Slice()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
			return round.NodeFailed, 0, kind.WrongType(err)
		case err != nil:
			return round.NodeFailed, 0, err
		case len(v) != 3:
			return round.NodeFailed, 0, fmt.Errorf("redlock: unexpected reply %v", v)
		case v[0] != 1:
			return round.NodeRefused, 0, &PermitsError{Stored: int(v[1]), Version: v[2],
				Err: fmt.Errorf("a later SetPermits stored %d permits at version %d", v[1], v[2])}
		}
		return round.NodeGranted, 0, nil
	}
	t, err := c.rounds.Run(ctx, round.Spec{Name: "set permits", Op: op}, nil, nil)
	if t == nil {
		return err
	}
	if t.Won() {
		s.adopt(next)
		return nil
	}
	k := ErrUnavailable
	for _, r := range t.Results {
		switch {
		case errors.Is(r.Err, ErrWrongType):
			k = ErrWrongType
		case errors.Is(r.Err, ErrPermits) && k != ErrWrongType:
			k = ErrPermits
		}
	}
	return &QuorumError{Op: "set permits", Name: s.name, Kind: k, Cause: err, Nodes: t.Snapshot()}
}

// Refresh reads the semaphore's size from the nodes and acquires under it
// from then on: the latest version a majority of them answered with. It
// keeps its own size if no node stores one. It fails with a *QuorumError
// of Kind ErrUnavailable if fewer than a majority answered, and with
// ErrPermits if the nodes hold different sizes at the latest version (a
// concurrent SetPermits: run SetPermits again).
func (s *Semaphore) Refresh(ctx context.Context) error {
	stored, err := s.read(ctx, "refresh")
	if err != nil {
		return err
	}
	top := highest(stored)
	if top.k == 0 {
		return nil // none stored
	}
	for _, z := range stored {
		if z.version == top.version && z.k != top.k {
			return &QuorumError{Op: "refresh", Name: s.name, Kind: ErrPermits,
				Cause: fmt.Errorf("the nodes store %d and %d permits at version %d: run SetPermits", top.k, z.k, top.version)}
		}
	}
	s.size.Store(&top)
	return nil
}

// read is each answering node's stored size, from at least a majority.
func (s *Semaphore) read(ctx context.Context, op string) ([]semSize, error) {
	c := s.c
	call := nodescript.NewCall(nodescript.SizeRead, []any{lease.PermitsKey(c.cfg.keyPrefix, s.name)})
	var mu sync.Mutex
	var out []semSize
	read := func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		v, err := call.Run(ctx, node).Int64Slice()
		if err != nil || len(v) != 2 {
			if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
				err = kind.WrongType(err)
			}
			return round.NodeFailed, 0, err
		}
		mu.Lock()
		out = append(out, semSize{k: int(v[0]), version: v[1]})
		mu.Unlock()
		return round.NodeGranted, 0, nil
	}
	t, err := c.rounds.Run(ctx, round.Spec{Name: op + " (read)", Op: read}, nil, nil)
	if t == nil {
		return nil, err
	}
	if !t.Won() {
		k := ErrUnavailable
		for _, r := range t.Results {
			if errors.Is(r.Err, ErrWrongType) {
				k = ErrWrongType
			}
		}
		return nil, &QuorumError{Op: op, Name: s.name, Kind: k, Cause: err, Nodes: t.Snapshot()}
	}
	mu.Lock()
	defer mu.Unlock()
	return out, nil
}

// highest is the size at the latest version among stored ({0, 0}: none).
func highest(stored []semSize) semSize {
	var top semSize
	for _, z := range stored {
		if z.k > 0 && (top.k == 0 || z.version > top.version) {
			top = z
		}
	}
	return top
}

// adopt makes z this Semaphore's size if it is a later version than its
// own, and reports whether it did.
func (s *Semaphore) adopt(z semSize) bool {
	for {
		cur := s.size.Load()
		if z.version <= cur.version || z.k < 1 || z.k > MaxPermits {
			return false
		}
		if s.size.CompareAndSwap(cur, &z) {
			return true
		}
	}
}

// learn adopts the latest size that a node's refusal in err, or in nodes,
// names, and reports whether this Semaphore's size changed.
func (s *Semaphore) learn(err error, nodes []NodeResult) bool {
	var qe *QuorumError
	if errors.As(err, &qe) {
		nodes = append(nodes, qe.Nodes...)
	}
	learnt := false
	for _, r := range nodes {
		var pe *PermitsError
		if errors.As(r.Err, &pe) && s.adopt(semSize{k: pe.Stored, version: pe.Version}) {
			learnt = true
		}
	}
	return learnt
}
