package redlock

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Fencing tokens, minted by the quorum (docs/fencing.md).
//
// Every fenced acquisition returns a token that only grows: round 1 rides on
// the acquisition itself (each node proposes a candidate c*256 + id from its
// counter G, above the highest token it holds for the name), round 2
// commits the largest candidate on a majority, raising the name's H and
// every committing node's G, and aborts if a node reports a higher token.
// The validity is computed after round 2.
//
// Per lock name a node keeps only H, which expires a retention R after its
// last commit: G, one counter per node, carries the order across names and
// across H's expiry. Tokens are below 2^53, so they are exact in JSON
// numbers and Lua doubles.

// MaxFencingNodes is the most nodes a fenced client can use: a node id is
// the low byte of every token.
const MaxFencingNodes = 256

// errForeignNode is the Err of a node that holds another roster than the
// one the client checked: another server is behind its address now.
var errForeignNode = fmt.Errorf("%w: the node holds another deployment's roster (another server behind its address?)", ErrWrongNodeList)

// errNoIdentity is the Err of a node that holds no fencing identity at all:
// never provisioned, or emptied.
var errNoIdentity = fmt.Errorf("%w: the node holds no fencing identity", ErrAmnesia)

// fencedAcquireCall builds round 1 for l.
func (c *Client) fencedAcquireCall(l *Lock, waiter string, waitedUs int64) *nodescript.Call {
	k, nk := l.keyArgs, &c.keys
	keys := []any{k[0], k[1], highKey(l.key), nk.counter, nk.id, nk.replid, nk.lost, nk.roster, nk.maxTTL, k[2], k[3], k[4]}
	if waiter == "" {
		// TryLock never queues: the queue's list and arguments are not used.
		return nodescript.NewCall(nodescript.FencedAcquire, keys[:10], l.valueArg, l.lease.arg, "", "", "", l.list.roster)
	}
	return nodescript.NewCall(nodescript.FencedAcquire, keys, l.valueArg, l.lease.arg, waiter, c.args.staleWaiter, waitedUs, l.list.roster)
}

// fencedAcquireOp is round 1 on one node.
func (l *Lock) fencedAcquireOp(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
	c := l.c
	if err := l.afterOwn(ctx, i); err != nil {
		return NodeFailed, 0, err
	}
	vals, err := l.acquire.Run(ctx, node).Int64Slice()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return NodeFailed, 0, kind.WrongType(err)
	case err != nil:
		return NodeFailed, 0, err
	case len(vals) != 2:
		return NodeFailed, 0, fmt.Errorf("redlock: unexpected reply %v", vals)
	case vals[0] == -2:
		c.noteAmnesia(i)
		return NodeAmnesiac, 0, errNoIdentity
	case vals[0] == -1:
		c.noteAmnesia(i)
		return NodeAmnesiac, 0, ErrAmnesia
	case vals[0] == -3:
		return NodeFailed, 0, l.foreign()
	case vals[1] != 0 && !l.list.admit(l, i, int(vals[1]&255)):
		// Not the node the check saw behind this address (another id), or
		// a member another address already counted for.
		c.checkList(false)
		return NodeFailed, 0, errNotChecked
	case vals[0] == 1:
		c.noteIntact(i)
		return NodeGranted, vals[1], nil
	case vals[0] == refusedPromised:
		l.promisedElsewhere.Add(1)
		fallthrough
	default:
		c.noteIntact(i)
		return NodeRefused, vals[1], nil
	}
}

// commit is round 2: raise H to token on a majority. It returns the kind of
// failure (nil on success) and the per-node results.
func (l *Lock) commit(ctx context.Context, token int64) (nodes []NodeResult, kind, cause error) {
	call := l.commitCall(token)
	return l.commitRound(ctx, token, func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		h, o, err := l.commitOn(ctx, call, i, node)
		switch {
		case o != NodeGranted:
			return o, 0, err
		case h > token:
			return NodeRefused, h, nil // someone committed a newer token
		default:
			return NodeGranted, h, nil
		}
	})
}

// foreign is the Err of a node that refused l's roster, and starts a new
// check of the node list. A client whose check found no roster (it ran
// before the deployment was provisioned) just has not learnt it yet.
func (l *Lock) foreign() error {
	l.c.checkList(false)
	if l.list.roster == "" {
		return errNotChecked
	}
	return errForeignNode
}

// commitOn runs round 2's call on node i: NodeGranted and the node's H
// (which the caller compares with the token), or why the node does not
// count.
func (l *Lock) commitOn(ctx context.Context, call *nodescript.Call, i int, node redis.UniversalClient) (int64, Outcome, error) {
	vals, err := call.Run(ctx, node).Int64Slice()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return 0, NodeFailed, kind.WrongType(err)
	case err != nil:
		return 0, NodeFailed, err
	case len(vals) != 2:
		return 0, NodeFailed, fmt.Errorf("redlock: unexpected reply %v", vals)
	case vals[0] == -1:
		l.c.noteAmnesia(i)
		return 0, NodeAmnesiac, ErrAmnesia
	case vals[0] == -3:
		return 0, NodeFailed, l.foreign()
	case !l.list.admit(l, i, int(vals[1])):
		l.c.checkList(false)
		return 0, NodeFailed, errNotChecked
	}
	return vals[0], NodeGranted, nil
}

// commitCall is round 2's script call for token.
func (l *Lock) commitCall(token int64) *nodescript.Call {
	nk := &l.c.keys
	return nodescript.NewCall(nodescript.Commit, []any{highKey(l.key), nk.counter, nk.floor, nk.id, nk.replid, nk.lost, nk.roster},
		token, l.c.args.retention, l.valueArg, l.list.roster)
}

// commitRound sends round 2 (op on every node) and tells its outcome: any
// node that refuses aborts the acquisition (a newer token was committed).
func (l *Lock) commitRound(ctx context.Context, token int64, op round.NodeOp) (nodes []NodeResult, kind, cause error) {
	c := l.c
	if tr := c.cfg.trace; tr != nil && tr.RoundTwo != nil {
		tr.RoundTwo(l.name, uint64(token))
	}
	aborted := func(t *round.Tally) bool { return t.Counts[NodeRefused] > 0 }
	t, ctxErr := c.rounds.Run(ctx, round.Spec{Name: "commit", Op: op},
		func(t *round.Tally) bool { return t.Decided() || aborted(t) }, nil)
	if t == nil {
		return nil, nil, ctxErr
	}
	switch {
	case ctxErr != nil:
		return t.Snapshot(), nil, ctxErr
	case aborted(t):
		return t.Snapshot(), ErrSuperseded, nil
	case !t.Won():
		if kind := blockingKind(t); kind != nil {
			return t.Snapshot(), kind, nil
		}
		return t.Snapshot(), ErrUnavailable, nil
	}
	return t.Snapshot(), nil, nil
}

// noteAmnesia warns, once per episode, that node i lost its fencing state,
// and starts repairing it online (repair.go).
func (c *Client) noteAmnesia(i int) {
	if c.amnesiac[i].CompareAndSwap(false, true) {
		c.log.Warn("redlock: node's fencing state is not intact (it lost its data, was restarted or "+
			"promoted, or was never provisioned); it is left out of quorums until repaired", "node", i)
	}
	c.repairOnline(i)
}

// noteIntact re-arms the warning once node i answers as intact again.
func (c *Client) noteIntact(i int) {
	if c.amnesiac[i].Load() {
		c.amnesiac[i].Store(false)
	}
}
