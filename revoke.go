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
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// Revocation is what Revoke did.
type Revocation struct {
	Name string
	// Holder is the value revoked on a majority of the nodes: the revoked
	// holder's ID(). "" if no value was held on a majority (the lock was
	// free, or held on too few nodes to count).
	Holder string
	// Revoked is, per node (in the order given to New), the value revoked
	// there: "" where nothing was held, or the node did not answer (Nodes
	// says which).
	Revoked []string
	// Nodes is each node's outcome: NodeGranted where it answered.
	Nodes []NodeResult
	// Readers are a read-write lock's readers revoked (RWMutex.Revoke).
	Readers []string
}

// Revoke releases the lock called name, whoever holds it, as the holder's
// Unlock would: the lock is promised to the longest-waiting Lock, or free
// for the next TryLock. It reads the name first (Inspect's round), then
// releases on each node only the value it read there: a holder that takes
// the lock between the two is neither touched nor reported. It is the operator's tool for a hold
// that its holder cannot release: a process that hangs while its lock's
// keep-alive runs, a holder stuck extending, a lock whose TTL is long.
//
// What it guarantees, once it returns without error (the revocation
// reached a majority):
//   - the revoked holder can no longer extend the lock: its value is gone
//     from a majority, so its next Extend fails (ErrExpired), and Do
//     cancels its fn's context at the next keep-alive;
//   - with fencing on, whoever acquires the name next gets a token above
//     the revoked holder's (the name's committed token H stays on every
//     node), so a fence (package fence) refuses the revoked holder's
//     writes once the next holder has written.
//
// What it does not: stop the revoked holder. Until its own validity ends
// or its next Extend fails, it still believes it holds the lock, and runs
// beside the next holder. With fencing on, the fence is what keeps its
// late writes out; without fencing (WithoutFencing, as with Redisson's
// forceUnlock) nothing does, and Revoke breaks mutual exclusion for the
// rest of the revoked holder's validity. Revoke a hold only once you know
// its holder has stopped, or behind a fence.
//
// It works on a mutex's name (Lock, TryLock, Do, and a multi-lock's
// members). A name held on no node is not an error: Holder is "". With
// fewer than a majority of answers to the read it revokes nothing; to the
// revocation, it returns what it did; either way with a *QuorumError (Op
// "revoke") of Kind ErrUnavailable, or ErrWrongType where a node holds
// another type under the lock key. If ctx ends first the error matches
// ctx's error; the nodes the revocation reached were revoked.

func (c *Client) Revoke(ctx context.Context, name string) (Revocation, error) {
	if err := validateName(name); err != nil {
		return Revocation{Name: name}, err
	}
	// What is revoked is what this read finds, each node's value only if
	// the node still holds it: a holder that takes a node between the
	// read and the revocation is not touched, nor reported.
	info, err := c.Inspect(ctx, name)
	if err != nil {
		rv := Revocation{Name: name}
		var qe *QuorumError
		if errors.As(err, &qe) {
			q := *qe
			q.Op = "revoke"
			rv.Nodes, err = q.Nodes, &q
		}
		return rv, err // nothing revoked
	}
	found := make([]string, len(c.nodes))
	for i, n := range info.Nodes {
		found[i] = n.Holder
		if n.Err != nil {
			found[i] = info.Holder // unread here: the majority's holder, if any
		}
	}
	return c.revoke(ctx, name, found)
}

// RevokeHolder is Revoke for one holder: it releases the lock called name
// only where the value id (the holder's ID(), as Inspect's Holder shows
// it) holds it. A holder that released meanwhile, and whoever took the
// lock after it, are left alone: Holder is then "", and that is not an
// error. `redlock revoke` revokes the holder it watched this way. An id
// that is no lock's is ErrBadID.
func (c *Client) RevokeHolder(ctx context.Context, name, id string) (Revocation, error) {
	if err := validateName(name); err != nil {
		return Revocation{Name: name}, err
	}
	if !isLockID(id) {
		return Revocation{Name: name}, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	found := make([]string, len(c.nodes))
	for i := range found {
		found[i] = id
	}
	return c.revoke(ctx, name, found)
}

// revoke releases, on each node i, the value values[i] if the node holds
// it ("": nothing there).
func (c *Client) revoke(ctx context.Context, name string, values []string) (Revocation, error) {
	rv := Revocation{Name: name}
	key := c.lockKey(name)
	keys := nodescript.BoxKeys(key, lease.NextKey(key), lease.QueueKey(key), lease.SeenKey(key))
	var mu sync.Mutex
	revoked := make([]string, len(c.nodes))
	op := func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		v, err := nodescript.NewCall(nodescript.Revoke, keys, c.promiseFor(), values[i]).Run(ctx, node).Text()
		if err != nil {
			if strings.HasPrefix(err.Error(), "WRONGTYPE") {
				return NodeFailed, 0, kind.WrongType(err)
			}
			return NodeFailed, 0, err
		}
		mu.Lock()
		revoked[i] = v
		mu.Unlock()
		return NodeGranted, 0, nil
	}
	t, err := c.rounds.Run(ctx, round.Spec{Name: "revoke", Op: op}, nil, nil)
	if t == nil {
		return rv, err
	}
	rv.Nodes = t.Snapshot()
	rv.Revoked = make([]string, len(c.nodes))
	count := map[string]int{}
	mu.Lock()
	for i, res := range t.Results {
		if res.Outcome == NodeGranted {
			rv.Revoked[i] = revoked[i]
			if revoked[i] != "" {
				count[revoked[i]]++
			}
		}
	}
	mu.Unlock()
	for v, n := range count {
		if n >= t.Majority {
			rv.Holder = v
		}
	}
	if err != nil || !t.Won() {
		qe := &QuorumError{Op: "revoke", Name: name, Kind: ErrUnavailable, Cause: err, Nodes: rv.Nodes}
		switch k := verdict.BlockingKind(t); {
		case wrongTypeBlocks(t):
			qe.Kind = ErrWrongType
		case k != nil:
			qe.Kind = k
		}
		return rv, qe
	}
	if rv.Holder != "" {
		c.log.Warn("redlock: lock revoked", "lock", name, "holder", rv.Holder)
	}
	return rv, nil
}

// Revoke releases every hold of the read-write lock, whoever holds it:
// the writer's and each reader's, as their Unlocks would (the phase-fair
// rule included: readers that waited for the write are admitted before
// the writers queued). It is Client.Revoke's, for a read-write lock, with
// the same guarantees and the same caveat: it does not stop the revoked
// holders, and without a fence nothing keeps their late writes out.
// Holder is the writer revoked, Readers the readers; Revoked and Nodes
// are Client.Revoke's only. A hold that ends by itself meanwhile is not
// an error.
func (m *RWMutex) Revoke(ctx context.Context) (Revocation, error) {
	rv := Revocation{Name: m.name}
	info, err := m.Inspect(ctx)
	if err != nil {
		return rv, err
	}
	c := m.c
	revoke := func(reader bool, id string) error {
		hold := &RWLock{c: c}
		hold.reading.Store(reader)
		return c.revokeHold(ctx, &hold.l, lease.Request{Name: m.name, Names: []string{lease.RWSettleName(m.name)}, Prefix: c.cfg.keyPrefix, Shape: lease.RW(reader)}, id)
	}
	if info.Write.Held {
		if err := revoke(false, info.Write.Holder); err != nil {
			return rv, err
		}
		rv.Holder = info.Write.Holder
	}
	for _, r := range info.Readers {
		if err := revoke(true, r.Holder); err != nil {
			return rv, err
		}
		rv.Readers = append(rv.Readers, r.Holder)
	}
	return rv, nil
}

// Revoke releases the permit whose ID() is id, whoever holds it, as its
// Release would: its slots go to the longest waiters in the line. It is
// Client.Revoke's, for a permit, with the same guarantees and caveat.
// Holder is id if the permit was held, "" if not (not an error); ErrBadID
// before anything is sent for an ID no permit can have.
func (s *Semaphore) Revoke(ctx context.Context, id string) (Revocation, error) {
	rv := Revocation{Name: s.name}
	if !isLockID(id) {
		return rv, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	p, err := s.Resume(ctx, id)
	if errors.Is(err, ErrExpired) {
		return rv, nil
	}
	if err != nil {
		return rv, err
	}
	if err := p.Release(ctx); err != nil && !errors.Is(err, ErrExpired) {
		return rv, err
	}
	rv.Holder = id
	s.c.log.Warn("redlock: permit revoked", "semaphore", s.name, "holder", id, "slots", p.slots)
	return rv, nil
}

// revokeHold adopts the hold id of r's shape and releases it. A hold
// already gone is not an error.
func (c *Client) revokeHold(ctx context.Context, l *lease.Lease, r lease.Request, id string) error {
	ls := c.defaultLease()
	r.Term = lease.Term{TTL: ls.ttl, Arg: ls.arg}
	if _, err := c.leases.Adopt(ctx, l, r, id, 0); err != nil {
		if err = publicError(err); errors.Is(err, ErrExpired) {
			return nil
		}
		return err
	}
	if err := c.release(ctx, l); err != nil && !errors.Is(err, ErrExpired) {
		return err
	}
	c.log.Warn("redlock: lock revoked", "lock", r.Name, "holder", id)
	return nil
}
