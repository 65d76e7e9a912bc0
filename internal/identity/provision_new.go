package identity

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/verdict"

	"github.com/google/uuid"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// The steps that give a new deployment its identity: every node claims a
// uuid, the roster of those uuids goes everywhere, and each node takes its
// rank in the roster as its id (docs/fencing.md, Provisioning).

// claimRoster claims a uuid on every node that has none, then records the
// roster of those uuids everywhere, and returns the nodes' states after.
func (d *Deployment) claimRoster(ctx context.Context, states []*nodeState) ([]*nodeState, error) {
	k := &d.keys
	uuids := make([]string, len(d.nodes))
	t, err := d.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		u, err := nodescript.Claim.Run(ctx, node, []string{k.UUID, k.Roster, k.ID}, uuid.NewString()).Text()
		uuids[i] = u
		return outcomeOf(err)
	})
	if err != nil {
		return nil, err
	}
	if t.Granted() < len(d.nodes) {
		return nil, d.quorumError(&verdict.Failure{Op: "provision (claim)", Kind: kind.ErrUnavailable, Nodes: t.Snapshot()})
	}
	for i, u := range uuids {
		if u == "" {
			// A roster or id appeared since the read: another
			// provisioner is further on. Go by what the nodes hold now.
			return d.readAllStates(ctx, "provision")
		}
		if slices.Index(uuids, u) != i {
			return nil, fmt.Errorf("%w: nodes %d and %d hold the same uuid", kind.ErrNodeIDConflict, slices.Index(uuids, u), i)
		}
	}
	roster := strings.Join(slices.Sorted(slices.Values(uuids)), ",")
	t, err = d.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		return outcomeOf(nodescript.Roster.Run(ctx, node, []string{k.UUID, k.Roster}, uuids[i], roster).Err())
	})
	if err != nil {
		return nil, err
	}
	if t.Granted() < len(d.nodes) {
		return nil, d.quorumError(&verdict.Failure{Op: "provision (roster)", Kind: kind.ErrUnavailable, Nodes: t.Snapshot()})
	}
	return d.readAllStates(ctx, "provision")
}

// assignIDs gives each node that holds the common roster and no id the rank
// of its uuid. Such a node never had an id: one that lost its data lost its
// uuid and roster with it, and one claimed by a stale provisioner holds a
// uuid outside the roster. So it was in no commit majority, and it may join
// with a low counter: any majority that meets a commit majority meets it at
// another node. A node restored from a snapshot taken before the ids
// breaks that rule: while ids are on a minority whose nodes counted
// acquisitions, it refuses (ErrAmnesia, a majority lost).
func (d *Deployment) assignIDs(ctx context.Context, states []*nodeState) error {
	roster, members, err := commonRoster(states, len(d.nodes))
	if err != nil {
		return err
	}
	var missing []int
	withID, silent := 0, false
	for i, s := range states {
		if s == nil {
			silent = true
			continue
		}
		rank := slices.Index(members, s.uuid)
		switch {
		case s.roster != roster || rank < 0:
			return fmt.Errorf("%w: node %d does not hold the deployment's roster; run Repair", kind.ErrAmnesia, i)
		case s.id >= 0 && s.id != rank:
			return fmt.Errorf("%w: node %d has id %d, its uuid's rank is %d", kind.ErrNodeIDConflict, i, s.id, rank)
		case s.id >= 0:
			withID++
		default:
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 && withID >= round.Majority(len(states)) {
		// A majority holds ids: fenced locks may have been taken without
		// the others.
		return d.repairMissing(ctx, missing)
	}
	if len(missing) > 0 && withID > 0 {
		// Ids on a minority: either the ids' step was cut short, or a
		// majority came back from a snapshot taken before it (it lost its
		// ids and counters, and tokens were issued since). A counter on a
		// node with an id tells the second: writing ids with no counters
		// would let that majority mint tokens below those it issued.
		if i := slices.IndexFunc(states, func(s *nodeState) bool { return s != nil && s.id >= 0 && s.counter > 0 }); i >= 0 {
			return fmt.Errorf("%w: nodes %v hold the roster but no id, and only a minority holds ids, while node %d "+
				"has counted acquisitions (counter %d): a majority lost its ids and counters (restored from a "+
				"snapshot taken while the deployment was provisioned?); docs/operations.md, \"A majority lost\"",
				kind.ErrAmnesia, missing, i, states[i].counter)
		}
	}
	if len(missing) == 0 {
		if i := slices.IndexFunc(states, func(s *nodeState) bool { return s != nil && !s.intact() }); i >= 0 {
			return fmt.Errorf("%w: node %d serves under a new replication id (restarted or promoted); run Repair", kind.ErrAmnesia, i)
		}
		return nil
	}
	if silent {
		// New ids are written only to a roster every node holds.
		return fmt.Errorf("%w: %w", kind.ErrUnavailable, errNewNeedsAll)
	}
	k := &d.keys
	t, err := d.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		if !slices.Contains(missing, i) {
			return round.NodeGranted, 0, nil
		}
		rank := slices.Index(members, states[i].uuid)
		id, err := nodescript.Assign.Run(ctx, node, []string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost},
			states[i].uuid, roster, rank).Int()
		if err == nil && id != rank {
			err = fmt.Errorf("%w: node %d lost its uuid or roster while being provisioned", kind.ErrAmnesia, i)
		}
		return outcomeOf(err)
	})
	if err != nil {
		return err
	}
	for _, r := range t.Results {
		if r.Err != nil {
			return fmt.Errorf("redlock: provision node %d: %w", r.Node, r.Err)
		}
	}
	if t.Granted() < len(d.nodes) {
		return d.quorumError(&verdict.Failure{Op: "provision (ids)", Kind: kind.ErrUnavailable, Nodes: t.Snapshot()})
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
		if k >= round.Majority(n) {
			members := strings.Split(r, ",")
			if len(members) != n {
				return "", nil, fmt.Errorf("%w: the roster has %d nodes, the client %d", kind.ErrNodeIDConflict, len(members), n)
			}
			return r, members, nil
		}
	}
	if len(count) == 0 {
		return "", nil, kind.ErrNotProvisioned
	}
	return "", nil, fmt.Errorf("%w: no majority of the nodes holds one roster; a majority lost its data "+
		"(docs/operations.md, \"A majority lost\")", kind.ErrAmnesia)
}
