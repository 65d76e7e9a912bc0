package identity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
)

// Repair brings back a node whose fencing state is not intact, in O(1): it
// reads the counters of a majority, not every lock name (docs/fencing.md,
// "Repair").

// errStampChanged ends a repair whose node changed since it was read.
var errStampChanged = fmt.Errorf("%w: repair superseded", kind.ErrAmnesia)

// RepairTooSoonError is returned by Repair while the node has not been out
// for the longest TTL in use: it may have lost lock keys that other clients
// still hold, so it must not count before those locks have expired (the
// delayed restart of the RedLock spec).
type RepairTooSoonError struct {
	Node int
	Wait time.Duration // how much longer to wait
}

func (e *RepairTooSoonError) Error() string {
	return fmt.Sprintf("redlock: repair node %d: %v; wait %v more", e.Node, kind.ErrRepairTooSoon, e.Wait.Round(time.Millisecond))
}

func (e *RepairTooSoonError) Unwrap() error { return kind.ErrRepairTooSoon }

// RepairConfig is how a repair proceeds: the root package's RepairOptions
// set it.
type RepairConfig struct {
	Now    bool // RepairWithoutDelay
	Adopt  bool // RepairAdopting
	online bool // a client's own background repair (repairOnline)
}

// Repair brings node i back after its fencing state stopped being intact
// (the root package's Repair documents how), bounded as the other
// operations here are.
func (d *Deployment) Repair(ctx context.Context, i int, rc RepairConfig) error {
	ctx, cancel := d.adminContext(ctx)
	defer cancel()
	return d.repair(ctx, i, rc)
}

func (d *Deployment) repair(ctx context.Context, i int, rc RepairConfig) error {
	begun := d.cfg.Clock.Now()
	states, t, err := d.readStates(ctx)
	if err != nil {
		return err
	}
	d.remember(states)
	target := states[i]
	if target == nil {
		return d.quorumError(&verdict.Failure{Op: "repair", Kind: kind.ErrUnavailable, Nodes: t.Snapshot()})
	}
	if v := judgeList(states, len(d.nodes)); v.Err != nil {
		return v.Err // a repair over a wrong list would graft a stranger in
	}
	if target.intact() {
		return nil
	}
	var intact []*nodeState
	for j, s := range states {
		if j != i && s != nil && s.intact() {
			intact = append(intact, s)
		}
	}
	if len(intact) < round.Majority(len(d.nodes)) {
		return fmt.Errorf("%w: repair node %d needs a majority of intact nodes, found %d of %d",
			kind.ErrUnavailable, i, len(intact), len(d.nodes))
	}
	roster, members, err := commonRoster(intact, len(d.nodes))
	if err != nil {
		return err
	}
	// The longest TTL any client used: every granted acquisition recorded
	// its TTL on a majority, which meets this one.
	var longest time.Duration
	var top int64
	for _, s := range intact {
		longest = max(longest, s.maxTTL)
		top = max(top, s.counter)
	}
	if wait := d.restartDelay(i, target, begun, longest); wait > 0 && !rc.Now {
		return &RepairTooSoonError{Node: i, Wait: wait}
	}
	if target.stamp == "" {
		return fmt.Errorf("%w: node %d holds no lost stamp to repair from (read-only?)", kind.ErrAmnesia, i)
	}
	u, err := d.takeUUID(ctx, i, states, members, rc)
	if err != nil {
		return err
	}
	k := &d.keys
	ok, err := nodescript.Repair.Run(ctx, d.nodes[i],
		[]string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.Floor, k.MaxTTL},
		u, roster, slices.Index(members, u), top+1, d.cfg.Retention, longest.Milliseconds(), target.stamp).Int()
	switch {
	case err != nil:
		return fmt.Errorf("redlock: repair node %d: %w", i, err)
	case ok == 2:
		return fmt.Errorf("%w: node %d's lost stamp changed during the repair (another client repaired it, "+
			"or it lost its data again); nothing was written", errStampChanged, i)
	case ok != 1:
		return fmt.Errorf("%w: node %d lost its uuid during the repair; try again", kind.ErrNodeIDConflict, i)
	}
	d.amnesiac[i].Store(false)
	d.knownMu.Lock()
	d.known[i] = u
	d.knownMu.Unlock()
	d.log.Info("redlock: node repaired", "node", i, "id", slices.Index(members, u), "counter", top+1)
	d.refreshList(ctx)
	return nil
}

// takeUUID returns the uuid node i is to hold: its own if it still holds a
// roster member nobody else holds with an id; else an orphan of the roster
// (a member no node holds), which it claims, then checks that no other node
// holds, giving it back if one does. Every node must answer for an orphan to
// be known.
//
// Which orphan: the uuid this client saw node i hold (remember), so that a
// client whose node list differs from the deployment's (a stranger in a
// member's place) cannot hand a live node's uuid, and so its id, to the
// stranger. Only an operator's Repair with RepairAdopting, vouching for the
// node, takes another: the orphan of node i's rank, by run id, among the
// emptied nodes, so that repairers that read the same states agree.
func (d *Deployment) takeUUID(ctx context.Context, i int, states []*nodeState, members []string, rc RepairConfig) (string, error) {
	own := states[i].uuid
	// heldBy is another node that holds u, preferring one with an id.
	heldBy := func(states []*nodeState, u string, except int) int {
		found := -1
		for j, s := range states {
			if j != except && s != nil && s.uuid == u && (found < 0 || s.id >= 0) {
				found = j
			}
		}
		return found
	}
	// emptied: holds no member, or only one that another node holds with an
	// id (a claim that lost, and was never given back).
	emptied := func(j int) bool {
		s := states[j]
		if !slices.Contains(members, s.uuid) {
			return true
		}
		k := heldBy(states, s.uuid, j)
		return s.id < 0 && k >= 0 && states[k].id >= 0
	}
	if slices.Contains(members, own) {
		if rc.online && d.knownUUID(i) != own {
			// A copy of a live member (its promoted replica, its backup on
			// another machine) holds the member's uuid too: only a client
			// that saw this address hold it may give it back on its own.
			return "", errNotAdoptable
		}
		switch k := heldBy(states, own, i); {
		case k < 0:
			return own, nil
		case !emptied(i):
			return "", fmt.Errorf("%w: nodes %d and %d hold the same uuid; try again", kind.ErrNodeIDConflict, i, k)
		}
	}
	if slices.Contains(states, nil) {
		return "", fmt.Errorf("%w: node %d lost its identity; every node must answer to repair it", kind.ErrUnavailable, i)
	}
	var orphans []string
	for _, u := range members {
		if heldBy(states, u, i) < 0 {
			orphans = append(orphans, u)
		}
	}
	var u string
	if known := d.knownUUID(i); slices.Contains(orphans, known) {
		u = known
	} else if !rc.Adopt {
		return "", errNotAdoptable
	} else {
		var out []*nodeState
		for j, s := range states {
			if emptied(j) {
				out = append(out, s)
			}
		}
		slices.SortFunc(out, func(a, b *nodeState) int { return strings.Compare(a.runID, b.runID) })
		rank := slices.Index(out, states[i])
		if rank < 0 || rank >= len(orphans) {
			return "", fmt.Errorf("%w: no uuid of the roster is free for node %d", kind.ErrNodeIDConflict, i)
		}
		u = orphans[rank]
	}
	k := &d.keys
	node := d.nodes[i]
	keys := []string{k.UUID, k.ID, k.Lost}
	got, err := nodescript.SwapUUID.Run(ctx, node, keys, own, u, states[i].stamp).Text()
	if err != nil {
		return "", fmt.Errorf("redlock: repair node %d: %w", i, err)
	}
	if got != u {
		return "", fmt.Errorf("%w: node %d changed during the repair; try again", kind.ErrNodeIDConflict, i)
	}
	after, err := d.readAllStates(ctx, "repair")
	if err == nil {
		if j := heldBy(after, u, i); j >= 0 {
			err = fmt.Errorf("%w: another repair gave node %d's uuid to node %d; try again", kind.ErrNodeIDConflict, i, j)
		}
	}
	if err != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.NodeTimeout)
		defer cancel()
		_ = nodescript.SwapUUID.Run(ctx, node, keys, u, "", states[i].stamp).Err()
		return "", err
	}
	return u, nil
}
