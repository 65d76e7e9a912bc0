package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

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
	if err := c.assignIDs(ctx, states); err != nil {
		return err
	}
	c.refreshList(ctx) // the ids and roster the attempts count votes by
	return nil
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
	if len(missing) > 0 && len(states)-len(missing) >= majority(len(states)) {
		// A majority holds ids: fenced locks may have been taken without
		// the others.
		return c.repairMissing(ctx, missing)
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

// repairMissing gives their ids to nodes that hold the roster but no id
// while a majority holds theirs, through Repair: such a node did not finish
// provisioning, or it was restored from a snapshot taken then and has lost
// everything since (lock keys and counters), so it waits out the delayed
// restart and gets counters above the others' like any node that lost its
// data. On a deployment that never took a lock there is nothing to wait
// for. Concurrent provisioners may repair the same node: what counts is
// that every node is intact afterwards.
func (c *Client) repairMissing(ctx context.Context, missing []int) error {
	var first error
	for _, i := range missing {
		if err := c.repair(ctx, i, repairConfig{}); err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		return nil
	}
	states, err := c.readAllStates(ctx, "provision")
	if err != nil {
		return err
	}
	for _, i := range missing {
		if !states[i].intact() {
			return fmt.Errorf("redlock: provision node %d: %w", i, first)
		}
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

// maxReprovisionAbove bounds Reprovision's above: tokens stay below 2^53,
// and a deployment reprovisioned just below this bound still has 2^44
// acquisitions (about 17 trillion) before they would reach it.
const maxReprovisionAbove = 1 << 52

// Reprovision recovers a deployment in which a majority of the nodes lost
// their fencing state, an outage no repair can end: it forgets every node's
// identity, raises every node's counter so that all later tokens exceed
// above, and provisions the deployment afresh. Every node must answer.
//
// above must be below 2^52 (ErrTokenRange otherwise), so that the tokens
// after it have room below 2^53, and at least the highest token any protected store accepted
// (each fence keeps its highest: fence.Redis's mark, the PostgreSQL fence's
// table); tokens from before the loss that were never seen by a store give
// no guarantee. Locks held across a Reprovision are not affected, but stop
// clients first where the stores cannot be read.
func (c *Client) Reprovision(ctx context.Context, above uint64) error {
	if !c.cfg.fencing {
		return nil
	}
	if above >= maxReprovisionAbove {
		return fmt.Errorf("%w: %d leaves too few tokens below 2^53; above must be below 2^52 (4503599627370496)",
			ErrTokenRange, above)
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
