package redlock

import (
	"context"
	"strings"
	"sync"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
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

// Revoke releases the lock called name on every node, whoever holds it,
// as the holder's Unlock would: the lock is promised to the longest-waiting
// Lock, or free for the next TryLock. It is the operator's tool for a hold
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
// fewer than a majority of answers it returns what it did and a
// *QuorumError (Op "revoke") of Kind ErrUnavailable, or ErrWrongType
// where a node holds another type under the lock key. If ctx ends first
// the error matches ctx's error; the nodes it reached were revoked.
func (c *Client) Revoke(ctx context.Context, name string) (Revocation, error) {
	rv := Revocation{Name: name}
	if err := validateName(name); err != nil {
		return rv, err
	}
	key := c.lockKey(name)
	call := nodescript.NewCall(nodescript.Revoke,
		nodescript.BoxKeys(key, lease.NextKey(key), lease.QueueKey(key), lease.SeenKey(key)), c.promiseFor())
	var mu sync.Mutex
	revoked := make([]string, len(c.nodes))
	op := func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		v, err := call.Run(ctx, node).Text()
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
		switch k := lease.BlockingKind(t); {
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
