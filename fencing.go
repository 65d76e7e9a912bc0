package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Fencing tokens, minted by the quorum (docs/fencing.md).
//
// Every fenced acquisition returns a token that only grows: round 1 rides on
// the acquisition itself (each node proposes a candidate c*256 + id above the
// highest token it has seen committed), round 2 commits the largest
// candidate on a majority and aborts if a node reports a higher one. The
// validity is computed after round 2.
//
// Tokens are below 2^53, so they are exact in JSON numbers and Lua doubles.

// MaxFencingNodes is the most nodes a fenced client can use: a node id is
// the low byte of every token.
const MaxFencingNodes = 256

// Token returns the lock's fencing token: larger than the token of every
// acquisition of the same name that returned before this one began, and
// larger than every token committed before this lock was granted (see
// docs/fencing.md for the exact guarantees). Pass it to the protected
// resource with every operation. It is 0 when fencing is off.
func (l *Lock) Token() uint64 { return l.token }

// keys of the fencing state of one lock name: they share its hash tag.
func counterKey(lockKey string) string { return lockKey + ":fence:counter" }
func highKey(lockKey string) string    { return lockKey + ":fence:high" }

// per-node identity keys
func (c *Client) nodeIDKey() string   { return c.cfg.keyPrefix + ":node-id" }
func (c *Client) nodeUUIDKey() string { return c.cfg.keyPrefix + ":node-uuid" }

// fencedAcquireOp is round 1 on one node.
func (l *Lock) fencedAcquireOp(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
	c := l.c
	vals, err := l.acquire.run(ctx, node).Int64Slice()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return NodeFailed, 0, fmt.Errorf("%w: %w", ErrWrongType, err)
	case err != nil:
		return NodeFailed, 0, err
	case len(vals) != 2:
		return NodeFailed, 0, fmt.Errorf("redlock: unexpected reply %v", vals)
	case vals[0] == -1:
		c.noteAmnesia(i)
		return NodeAmnesiac, 0, ErrAmnesia
	case vals[0] == 1:
		c.noteHealthy(i)
		return NodeGranted, vals[1], nil
	default:
		c.noteHealthy(i)
		return NodeRefused, vals[1], nil
	}
}

// commit is round 2: raise H to token on a majority. It returns the kind of
// failure (nil on success) and the per-node results.
func (l *Lock) commit(ctx context.Context, token int64) (nodes []NodeResult, kind, cause error) {
	c := l.c
	call := newScriptCall(commitLua, []any{highKey(l.key), c.args.nodeIDKey}, token)
	op := func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		h, err := call.run(ctx, node).Int64()
		switch {
		case err != nil:
			return NodeFailed, 0, err
		case h == -1:
			c.noteAmnesia(i)
			return NodeAmnesiac, 0, ErrAmnesia
		case h > token && c.cfg.naive != naiveNoAbort && c.cfg.naive != naiveEarlyValidity:
			return NodeRefused, h, nil // someone committed a newer token
		default:
			return NodeGranted, h, nil
		}
	}
	if c.testHookBeforeCommit != nil {
		c.testHookBeforeCommit()
	}
	deadline := time.Now().Add(c.cfg.nodeTimeout)
	replies, err := c.fanOut(ctx, nil, nil, op, nil)
	if err != nil {
		return nil, nil, err
	}
	t := newTally(len(c.nodes))
	aborted := func(t *tally) bool { return t.counts[NodeRefused] > 0 }
	ctxErr := c.collect(ctx, replies, t, func(t *tally) bool { return t.decided() || aborted(t) }, deadline, nil)
	switch {
	case ctxErr != nil:
		return t.snapshot(), nil, ctxErr
	case aborted(t):
		return t.snapshot(), ErrSuperseded, nil
	case !t.won():
		return t.snapshot(), ErrUnavailable, nil
	}
	return t.snapshot(), nil, nil
}

// noteAmnesia warns, once per episode, that node i lost its fencing state.
func (c *Client) noteAmnesia(i int) {
	if c.amnesiac[i].CompareAndSwap(false, true) {
		c.log.Warn("redlock: node has no id marker (lost its data, or never provisioned); "+
			"it is left out of quorums until repaired with Client.Repair", "node", i)
	}
}

func (c *Client) noteHealthy(i int) {
	if c.amnesiac[i].Load() {
		c.amnesiac[i].Store(false)
	}
}

// nodeIdentity is what a node holds of its identity: a uuid (claimed
// once) and an id (-1 if none).
type nodeIdentity struct {
	uuid string
	id   int
}

// identities runs the provisioning script on every node and returns what
// each holds afterwards. With claim set it also claims a uuid where there is
// none; ids (when not nil) are set where a node has none. Every node must
// answer within the node timeout.
func (c *Client) identities(ctx context.Context, claim bool, ids []int) ([]nodeIdentity, error) {
	out := make([]nodeIdentity, len(c.nodes))
	op := func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		newUUID, id := "", ""
		if claim {
			newUUID = uuid.NewString()
		}
		if ids != nil && ids[i] >= 0 {
			id = strconv.Itoa(ids[i])
		}
		res, err := provisionLua.Run(ctx, node, []string{c.nodeUUIDKey(), c.nodeIDKey()}, newUUID, id).Slice()
		if err != nil {
			return NodeFailed, 0, err
		}
		out[i] = nodeIdentity{id: -1}
		if s, ok := res[0].(string); ok {
			out[i].uuid = s
		}
		if s, ok := res[1].(string); ok {
			if n, err := strconv.Atoi(s); err == nil {
				out[i].id = n
			}
		}
		return NodeGranted, 0, nil
	}
	deadline := time.Now().Add(c.cfg.nodeTimeout)
	replies, err := c.fanOut(ctx, nil, nil, op, nil)
	if err != nil {
		return nil, err
	}
	t := newTally(len(c.nodes))
	never := func(*tally) bool { return false }
	if err := c.collect(ctx, replies, t, never, deadline, nil); err != nil {
		return nil, err
	}
	if t.granted() < len(c.nodes) {
		// out is not read: calls that timed out may still write to it.
		return nil, &QuorumError{Op: "read node identities", Kind: ErrUnavailable, Nodes: t.snapshot()}
	}
	return out, nil
}

// Provision gives every node of a fresh deployment its fencing identity: a
// node id, unique across the set, stored on the node itself. Every node must
// be reachable. It is safe to call from many clients at once, and again
// later: they all converge on the same ids, because each node first claims a
// random uuid (the first writer wins) and the ids are the ranks of those
// uuids.
//
// In a deployment that is already provisioned, a node with no id has lost
// its data (or is new): Provision leaves it out and returns an error that
// matches ErrAmnesia. Bring it back with Repair.
//
// TryLock provisions a fresh deployment by itself on first use; call
// Provision to do it up front (at deploy time, or from `redlock doctor`).
func (c *Client) Provision(ctx context.Context) error {
	if !c.cfg.fencing {
		return nil
	}
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	state, err := c.provisionedState(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(state, func(n nodeIdentity) bool { return n.id >= 0 }) {
		// Fresh: claim uuids everywhere first, then rank them.
		if state, err = c.identities(ctx, true, nil); err != nil {
			return err
		}
	}
	if !slices.ContainsFunc(state, func(n nodeIdentity) bool { return n.id < 0 }) {
		return checkUnique(state)
	}
	uuids := make([]string, len(state))
	for i, n := range state {
		if n.uuid == "" {
			return fmt.Errorf("%w: node %d has an id but no uuid", ErrNodeIDConflict, i)
		}
		uuids[i] = n.uuid
	}
	sorted := slices.Sorted(slices.Values(uuids))
	ids := make([]int, len(state))
	for i, u := range uuids {
		ids[i] = slices.Index(sorted, u)
	}
	if state, err = c.identities(ctx, false, ids); err != nil {
		return err
	}
	return checkUnique(state)
}

// provisionedState reads the identities and rejects a provisioned
// deployment with an amnesiac node. A node with a uuid but no id is one a
// provisioning client has not finished yet; one with neither, in a
// deployment where some node has an id, has lost its data (or is new).
//
// The nodes are not read at one instant, so a node read just before a
// concurrent client claimed its uuid can look empty beside a node that
// already has its id. Every id is written after every node has its uuid,
// so a second read, which starts after the first saw that id, settles it.
func (c *Client) provisionedState(ctx context.Context) ([]nodeIdentity, error) {
	for try := 0; ; try++ {
		state, err := c.readIdentities(ctx)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(state, func(n nodeIdentity) bool { return n.id >= 0 }) {
			return state, nil
		}
		lost := slices.IndexFunc(state, func(n nodeIdentity) bool { return n.id < 0 && n.uuid == "" })
		if lost < 0 {
			return state, nil
		}
		if try > 0 {
			return nil, fmt.Errorf("%w: node %d has no identity in a provisioned deployment; run Repair", ErrAmnesia, lost)
		}
	}
}

// readIdentities reads every node's identity without writing anything.
func (c *Client) readIdentities(ctx context.Context) ([]nodeIdentity, error) {
	return c.identities(ctx, false, nil)
}

// NodeIDs returns each node's fencing id, -1 for a node without one (not
// provisioned, or amnesiac). Every node must answer.
func (c *Client) NodeIDs(ctx context.Context) ([]int, error) {
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	state, err := c.readIdentities(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]int, len(state))
	for i, n := range state {
		ids[i] = n.id
	}
	return ids, nil
}

func checkUnique(state []nodeIdentity) error {
	seen := map[int]int{}
	for i, n := range state {
		if n.id < 0 {
			continue
		}
		if j, dup := seen[n.id]; dup {
			return fmt.Errorf("%w: nodes %d and %d both have id %d", ErrNodeIDConflict, j, i, n.id)
		}
		seen[n.id] = i
	}
	return nil
}

// adminContext bounds provisioning and repair, which go-redis may not bound
// by itself.
func (c *Client) adminContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Minute)
}

// provisionFresh provisions the deployment when an attempt found no node
// with an identity. It tries at most once a second, so a deployment that
// cannot be provisioned (a node down) does not pay for it on every attempt.
// It reports whether every node now has its identity.
func (c *Client) provisionFresh(ctx context.Context) bool {
	c.provMu.Lock()
	defer c.provMu.Unlock()
	if time.Since(c.provTried) < time.Second {
		return false
	}
	c.provTried = time.Now()
	if err := c.Provision(ctx); err != nil {
		c.log.Warn("redlock: could not give the nodes their fencing identities", "err", err)
		return false
	}
	return true
}

// Repair brings back node i after it lost its data (it has no id marker),
// without breaking the token guarantees:
//
//  1. read the highest committed token H of every lock name from every
//     other node that has its identity (at least a majority);
//  2. raise node i's counter and H of each name to that maximum;
//  3. only then give node i an id: the smallest one no other node uses.
//
// Until step 3 the node's replies do not count, so commits made meanwhile
// live on majorities without it. Every node must be reachable. Run one
// repair at a time. A node that still has its id is left as it is.
func (c *Client) Repair(ctx context.Context, i int) error {
	if i < 0 || i >= len(c.nodes) {
		return fmt.Errorf("redlock: repair: no node %d", i)
	}
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	state, err := c.readIdentities(ctx)
	if err != nil {
		return err
	}
	if state[i].id >= 0 {
		return nil
	}
	used := map[int]bool{}
	var sources []redis.UniversalClient
	for j, n := range state {
		if j != i && n.id >= 0 {
			used[n.id] = true
			sources = append(sources, c.nodes[j])
		}
	}
	if len(sources) < majority(len(c.nodes)) {
		return fmt.Errorf("%w: repair needs a majority of nodes with their identity, found %d", ErrUnavailable, len(sources))
	}
	high := map[string]int64{}
	for _, src := range sources {
		if err := c.scanHigh(ctx, src, high); err != nil {
			return err
		}
	}
	target := c.nodes[i]
	for key, h := range high {
		lockKey := strings.TrimSuffix(key, ":fence:high")
		if err := raiseLua.Run(ctx, target, []string{counterKey(lockKey), highKey(lockKey)}, h).Err(); err != nil {
			return fmt.Errorf("redlock: repair node %d: %w", i, err)
		}
	}
	id := 0
	for used[id] {
		id++
	}
	if id >= MaxFencingNodes {
		return fmt.Errorf("%w: no free node id", ErrNodeIDConflict)
	}
	if err := provisionLua.Run(ctx, target, []string{c.nodeUUIDKey(), c.nodeIDKey()}, uuid.NewString(), strconv.Itoa(id)).Err(); err != nil {
		return fmt.Errorf("redlock: repair node %d: %w", i, err)
	}
	if state, err = c.readIdentities(ctx); err != nil {
		return err
	}
	if err := checkUnique(state); err != nil {
		return err
	}
	c.log.Info("redlock: node repaired", "node", i, "id", id, "lock names", len(high))
	return nil
}

// scanHigh folds the highest committed token of every lock name on node
// into high.
func (c *Client) scanHigh(ctx context.Context, node redis.UniversalClient, high map[string]int64) error {
	pattern := globEscape(c.cfg.keyPrefix) + ":{*}:fence:high"
	iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		h, err := node.Get(ctx, key).Int64()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("redlock: repair: read %s: %w", key, err)
		}
		high[key] = max(high[key], h)
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("redlock: repair: scan: %w", err)
	}
	return nil
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// naiveVariant selects a broken token scheme from docs/fencing.md. Only the
// tests set it, to show that their checks catch what it breaks.
type naiveVariant uint8

const (
	naiveOff           naiveVariant = iota
	naiveNoCommit                   // counterexample 1: max of round-1 candidates, no round 2
	naiveEarlyValidity              // counterexample 2: validity checked after round 1; no abort rule
	naiveNoAbort                    // counterexample 3: validity after round 2, but no abort rule
)
