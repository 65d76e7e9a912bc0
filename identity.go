package redlock

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Node identity (docs/fencing.md, "Node identity"). Every node holds a
// uuid, claimed once; the roster, the sorted uuids of every node, recorded on
// every node; and its id, the rank of its uuid in the roster. Ids are
// written only to nodes that hold the same roster, so two provisioners that
// saw different nodes (one lost its data in between) cannot both write
// them, and ids are unique by construction.
//
// Provisioning is explicit (Provision, `redlock provision`): a deployment
// whose nodes all lost their data looks exactly like a new one, and
// provisioning it again would restart the tokens without a word. A fenced
// acquisition on nodes that hold no identity fails with ErrNotProvisioned.

var (
	//go:embed lua/node_state.lua
	nodeStateScript string
	//go:embed lua/claim.lua
	claimScript string
	//go:embed lua/roster.lua
	rosterScript string
	//go:embed lua/assign.lua
	assignScript string
	//go:embed lua/reset.lua
	resetScript string

	nodeStateLua = newScript(`local IDKEY, REPLIDKEY, LOSTKEY = KEYS[3], KEYS[4], KEYS[5]
` + identityPrelude + nodeStateScript)
	claimLua  = newScript(claimScript)
	rosterLua = newScript(rosterScript)
	assignLua = newScript(assignScript)
	resetLua  = newScript(resetScript)
)

// nodeState is what one node holds of its fencing identity and counters.
type nodeState struct {
	uuid, roster string
	id           int // -1: none
	replid       string
	curReplid    string // the replication id the node serves under now
	lostAt       int64  // node ms when first found not intact in this episode; 0: never
	now          int64  // node ms
	uptime       time.Duration
	counter      int64 // G
	maxTTL       time.Duration
	runID        string
	usedMemory   int64
	maxMemory    int64 // 0: no limit
}

// intact: the node counts in fenced quorums.
func (s *nodeState) intact() bool {
	return s.id >= 0 && (s.replid == "" || s.replid == s.curReplid)
}

func parseNodeState(v []any) (*nodeState, error) {
	if len(v) != 13 {
		return nil, fmt.Errorf("redlock: unexpected node state %v", v)
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
	s := &nodeState{
		uuid: str(0), roster: str(1), id: -1, replid: str(3), curReplid: str(4),
		now: num(6), uptime: time.Duration(num(7)) * time.Second,
		counter: num(8), maxTTL: time.Duration(num(9)) * time.Millisecond, runID: str(10),
		usedMemory: num(11), maxMemory: num(12),
	}
	if id, err := strconv.Atoi(str(2)); err == nil {
		s.id = id
	}
	// A stamp made under another replication id dates an earlier episode.
	if ms, replid, ok := strings.Cut(str(5), ":"); ok && replid == s.curReplid {
		s.lostAt, _ = strconv.ParseInt(ms, 10, 64)
	}
	return s, nil
}

// onNodes runs op on every node, each call bounded by the node timeout, and
// returns the tally once every node answered or timed out.
func (c *Client) onNodes(ctx context.Context, op nodeOp) (*tally, error) {
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
	return t, nil
}

// readStates reads every node's state; a node that did not answer is nil.
func (c *Client) readStates(ctx context.Context) ([]*nodeState, *tally, error) {
	out := make([]*nodeState, len(c.nodes))
	k := &c.keys
	keys := []string{k.uuid, k.roster, k.id, k.replid, k.lost, k.counter, k.maxTTL}
	t, err := c.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		v, err := nodeStateLua.Run(ctx, node, keys).Slice()
		if err != nil {
			return NodeFailed, 0, err
		}
		s, err := parseNodeState(v)
		if err != nil {
			return NodeFailed, 0, err
		}
		out[i] = s
		return NodeGranted, 0, nil
	})
	if err != nil {
		return nil, nil, err
	}
	// A call that timed out may still write its slot: keep only answers.
	states := make([]*nodeState, len(c.nodes))
	for i, r := range t.results {
		if r.Outcome == NodeGranted {
			states[i] = out[i]
		}
	}
	return states, t, nil
}

// readAllStates is readStates where every node must answer.
func (c *Client) readAllStates(ctx context.Context, op string) ([]*nodeState, error) {
	states, t, err := c.readStates(ctx)
	if err != nil {
		return nil, err
	}
	if t.granted() < len(c.nodes) {
		return nil, &QuorumError{Op: op, Kind: ErrUnavailable, Nodes: t.snapshot()}
	}
	return states, distinctServers(states)
}

// distinctServers refuses two clients for one server: it would count twice
// in every quorum.
func distinctServers(states []*nodeState) error {
	seen := map[string]int{}
	for i, s := range states {
		if s == nil || s.runID == "" {
			continue
		}
		if j, dup := seen[s.runID]; dup {
			return fmt.Errorf("%w: nodes %d and %d are the same server (run_id %s)", ErrDuplicateNode, j, i, s.runID)
		}
		seen[s.runID] = i
	}
	return nil
}

// Provision gives every node of a new deployment its fencing identity. Every
// node must answer. Many clients may provision at once, and Provision may be
// called again later: it converges, and on a deployment that is already
// provisioned it changes nothing.
//
// It returns an error matching ErrAmnesia when some nodes lost their
// identity in a provisioned deployment (Repair brings each back, and clients
// do so by themselves once a majority is intact), and ErrNodeIDConflict when
// the nodes disagree in a way no repair fixes alone. Once any node holds an
// id, it writes ids only to nodes that hold the deployment's roster: a
// deployment that lost a majority is never provisioned again (see
// Reprovision).
//
// Fenced acquisitions on a deployment nobody provisioned fail with
// ErrNotProvisioned: call Provision at deploy time (or `redlock provision`).
func (c *Client) Provision(ctx context.Context) error {
	if !c.cfg.fencing {
		return nil
	}
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	states, err := c.readAllStates(ctx, "provision")
	if err != nil {
		return err
	}
	// Until some node has an id, no token exists, and provisioning can be
	// carried on from wherever another provisioner left it.
	if !slices.ContainsFunc(states, func(s *nodeState) bool { return s.id >= 0 }) {
		if states, err = c.claimRoster(ctx, states); err != nil {
			return err
		}
	}
	return c.assignIDs(ctx, states)
}

// claimRoster claims a uuid on every node that has none, then records the
// roster of those uuids everywhere, and returns the nodes' states after.
func (c *Client) claimRoster(ctx context.Context, states []*nodeState) ([]*nodeState, error) {
	k := &c.keys
	uuids := make([]string, len(c.nodes))
	t, err := c.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		u, err := claimLua.Run(ctx, node, []string{k.uuid, k.roster, k.id}, uuid.NewString()).Text()
		uuids[i] = u
		return outcomeOf(err)
	})
	if err != nil {
		return nil, err
	}
	if t.granted() < len(c.nodes) {
		return nil, &QuorumError{Op: "provision (claim)", Kind: ErrUnavailable, Nodes: t.snapshot()}
	}
	for i, u := range uuids {
		if u == "" {
			// A roster or id appeared since the read: another
			// provisioner is further on. Go by what the nodes hold now.
			return c.readAllStates(ctx, "provision")
		}
		if slices.Index(uuids, u) != i {
			return nil, fmt.Errorf("%w: nodes %d and %d hold the same uuid", ErrNodeIDConflict, slices.Index(uuids, u), i)
		}
	}
	roster := strings.Join(slices.Sorted(slices.Values(uuids)), ",")
	t, err = c.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		return outcomeOf(rosterLua.Run(ctx, node, []string{k.uuid, k.roster}, uuids[i], roster).Err())
	})
	if err != nil {
		return nil, err
	}
	if t.granted() < len(c.nodes) {
		return nil, &QuorumError{Op: "provision (roster)", Kind: ErrUnavailable, Nodes: t.snapshot()}
	}
	return c.readAllStates(ctx, "provision")
}

// assignIDs gives each node that holds the common roster and no id the rank
// of its uuid. Such a node never had an id: one that lost its data lost its
// uuid and roster with it, and one claimed by a stale provisioner holds a
// uuid outside the roster. So it was in no commit majority, and it may join
// with a low counter: any majority that meets a commit majority meets it at
// another node.
func (c *Client) assignIDs(ctx context.Context, states []*nodeState) error {
	roster, members, err := commonRoster(states, len(c.nodes))
	if err != nil {
		return err
	}
	var missing []int
	for i, s := range states {
		rank := slices.Index(members, s.uuid)
		switch {
		case s.roster != roster || rank < 0:
			return fmt.Errorf("%w: node %d does not hold the deployment's roster; run Repair", ErrAmnesia, i)
		case s.id >= 0 && s.id != rank:
			return fmt.Errorf("%w: node %d has id %d, its uuid's rank is %d", ErrNodeIDConflict, i, s.id, rank)
		case s.id >= 0:
		default:
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		if i := slices.IndexFunc(states, func(s *nodeState) bool { return !s.intact() }); i >= 0 {
			return fmt.Errorf("%w: node %d serves under a new replication id (restarted or promoted); run Repair", ErrAmnesia, i)
		}
		return nil
	}
	k := &c.keys
	t, err := c.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		if !slices.Contains(missing, i) {
			return NodeGranted, 0, nil
		}
		rank := slices.Index(members, states[i].uuid)
		id, err := assignLua.Run(ctx, node, []string{k.uuid, k.roster, k.id, k.replid, k.lost},
			states[i].uuid, roster, rank).Int()
		if err == nil && id != rank {
			err = fmt.Errorf("%w: node %d lost its uuid or roster while being provisioned", ErrAmnesia, i)
		}
		return outcomeOf(err)
	})
	if err != nil {
		return err
	}
	for _, r := range t.results {
		if r.Err != nil {
			return fmt.Errorf("redlock: provision node %d: %w", r.Node, r.Err)
		}
	}
	if t.granted() < len(c.nodes) {
		return &QuorumError{Op: "provision (ids)", Kind: ErrUnavailable, Nodes: t.snapshot()}
	}
	return nil
}

// commonRoster returns the roster a majority of the nodes hold, and its
// uuids.
func commonRoster(states []*nodeState, n int) (string, []string, error) {
	count := map[string]int{}
	for _, s := range states {
		if s != nil && s.roster != "" {
			count[s.roster]++
		}
	}
	for r, k := range count {
		if k >= majority(n) {
			members := strings.Split(r, ",")
			if len(members) != n {
				return "", nil, fmt.Errorf("%w: the roster has %d nodes, the client %d", ErrNodeIDConflict, len(members), n)
			}
			return r, members, nil
		}
	}
	if len(count) == 0 {
		return "", nil, ErrNotProvisioned
	}
	return "", nil, fmt.Errorf("%w: no majority of the nodes holds one roster; a majority lost its data "+
		"(docs/operations.md, \"A majority lost\")", ErrAmnesia)
}

func outcomeOf(err error) (Outcome, int64, error) {
	if err != nil {
		return NodeFailed, 0, err
	}
	return NodeGranted, 0, nil
}

// NodeIDs returns each node's fencing id, -1 for a node whose fencing state
// is not intact (not provisioned, emptied, restarted or promoted). Every
// node must answer.
func (c *Client) NodeIDs(ctx context.Context) ([]int, error) {
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	states, err := c.readAllStates(ctx, "read node ids")
	if err != nil {
		return nil, err
	}
	ids := make([]int, len(states))
	for i, s := range states {
		ids[i] = -1
		if s.intact() {
			ids[i] = s.id
		}
	}
	return ids, nil
}

// Reprovision recovers a deployment in which a majority of the nodes lost
// their fencing state, an outage no repair can end: it forgets every node's
// identity, raises every node's counter so that all later tokens exceed
// above, and provisions the deployment afresh. Every node must answer.
//
// above must be at least the highest token any protected store accepted
// (each fence keeps its highest: fence.Redis's mark, the PostgreSQL fence's
// table); tokens from before the loss that were never seen by a store give
// no guarantee. Locks held across a Reprovision are not affected, but stop
// clients first where the stores cannot be read.
func (c *Client) Reprovision(ctx context.Context, above uint64) error {
	if !c.cfg.fencing {
		return nil
	}
	if above >= 1<<53 {
		return fmt.Errorf("%w: %d is not below 2^53", ErrTokenRange, above)
	}
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	if _, err := c.readAllStates(ctx, "reprovision"); err != nil {
		return err
	}
	k := &c.keys
	floor := int64(above/256) + 1
	t, err := c.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		return outcomeOf(resetLua.Run(ctx, node, []string{k.uuid, k.roster, k.id, k.replid, k.lost, k.counter, k.floor},
			floor, c.args.retention).Err())
	})
	if err != nil {
		return err
	}
	if t.granted() < len(c.nodes) {
		return &QuorumError{Op: "reprovision", Kind: ErrUnavailable, Nodes: t.snapshot()}
	}
	c.log.Warn("redlock: deployment reprovisioned", "tokens above", above)
	return c.Provision(ctx)
}

// adminContext bounds provisioning and repair, which go-redis may not bound
// by itself.
func (c *Client) adminContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Minute)
}
