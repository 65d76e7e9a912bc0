package redlock

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
)

// Repair brings back a node whose fencing state is not intact, in O(1): it
// reads the counters of a majority, not every lock name (docs/fencing.md,
// "Repair").

// errStampChanged ends a repair whose node changed since it was read.
var errStampChanged = fmt.Errorf("%w: repair superseded", ErrAmnesia)

// RepairTooSoonError is returned by Repair while the node has not been out
// for the longest TTL in use: it may have lost lock keys that other clients
// still hold, so it must not count before those locks have expired (the
// delayed restart of the RedLock spec).
type RepairTooSoonError struct {
	Node int
	Wait time.Duration // how much longer to wait
}

func (e *RepairTooSoonError) Error() string {
	return fmt.Sprintf("redlock: repair node %d: %v; wait %v more", e.Node, ErrRepairTooSoon, e.Wait.Round(time.Millisecond))
}

func (e *RepairTooSoonError) Unwrap() error { return ErrRepairTooSoon }

// A RepairOption changes how Repair proceeds.
type RepairOption func(*repairConfig)

type repairConfig struct {
	now    bool
	adopt  bool
	online bool // a client's own background repair (repairOnline)
}

// RepairWithoutDelay repairs at once, without waiting out the delayed
// restart. Use it only when no lock can be held on the node: a node that was
// never used, or a deployment whose clients are all stopped for at least the
// longest TTL.
func RepairWithoutDelay() RepairOption { return func(r *repairConfig) { r.now = true } }

// RepairAdopting lets Repair give a node that holds no member of the
// deployment's roster (emptied, or a new server) the one member no node
// holds: the operator vouches that the node stands for that member, and that
// the server which held it will never serve again. Without it, Repair
// gives a node back only the member this client saw it hold: a list with a
// stranger in a member's place must not graft the stranger in
// (docs/operations.md, "Replacing a node").
func RepairAdopting() RepairOption { return func(r *repairConfig) { r.adopt = true } }

// Repair brings node i back after its fencing state stopped being intact: it
// lost its data, or it serves under a new replication id (restarted, or a
// replica promoted in a failover). It
//
//  1. waits out the delayed restart: until the node has been out for the
//     longest TTL in use (the longest any acquisition recorded on a
//     majority), it returns a *RepairTooSoonError saying how long to wait.
//     "Out" runs from the node's lost stamp, written by the first script
//     that found it not intact, and must have lasted that long both by the
//     node's clock and by this client's own, since this client first saw
//     that stamp: a client that has just started, such as `redlock repair`,
//     waits a full longest TTL whatever the node says;
//  2. reads the counter G of a majority of intact nodes, in a read that
//     begins after the delay;
//  3. in one script on node i, only if the node still holds the stamp it
//     read (a wipe or another repair since makes it fail, and nothing is
//     written): raises its G above them, sets the repair floor E to that
//     value for the retention, and restores its identity.
//
// A node that lost its uuid takes back the one uuid of the roster that no
// node holds; every node must then answer, so that uuid is known to be
// free. Repair is safe to run from several clients at once. A node that is
// intact is left as it is. Clients repair nodes by themselves (online),
// once a majority is intact and the delay has passed. A nil RepairOption
// is refused with ErrNilOption, before anything is sent.
func (c *Client) Repair(ctx context.Context, i int, opts ...RepairOption) error {
	if i < 0 || i >= len(c.nodes) {
		return fmt.Errorf("redlock: repair: no node %d", i)
	}
	if !c.cfg.fencing {
		return nil
	}
	var rc repairConfig
	for j, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: opts[%d]", ErrNilOption, j)
		}
		o(&rc)
	}
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	return c.repair(ctx, i, rc)
}

func (c *Client) repair(ctx context.Context, i int, rc repairConfig) error {
	begun := c.cfg.clock.Now()
	states, t, err := c.readStates(ctx)
	if err != nil {
		return err
	}
	c.remember(states)
	target := states[i]
	if target == nil {
		return &QuorumError{Op: "repair", Kind: ErrUnavailable, Nodes: t.Snapshot()}
	}
	if v := judgeList(states, len(c.nodes)); v.Err != nil {
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
	if len(intact) < round.Majority(len(c.nodes)) {
		return fmt.Errorf("%w: repair node %d needs a majority of intact nodes, found %d of %d",
			ErrUnavailable, i, len(intact), len(c.nodes))
	}
	roster, members, err := commonRoster(intact, len(c.nodes))
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
	if wait := c.restartDelay(i, target, begun, longest); wait > 0 && !rc.now {
		return &RepairTooSoonError{Node: i, Wait: wait}
	}
	if target.stamp == "" {
		return fmt.Errorf("%w: node %d holds no lost stamp to repair from (read-only?)", ErrAmnesia, i)
	}
	u, err := c.takeUUID(ctx, i, states, members, rc)
	if err != nil {
		return err
	}
	k := &c.keys
	ok, err := nodescript.Repair.Run(ctx, c.nodes[i],
		[]string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.Floor, k.MaxTTL},
		u, roster, slices.Index(members, u), top+1, c.args.retention, longest.Milliseconds(), target.stamp).Int()
	switch {
	case err != nil:
		return fmt.Errorf("redlock: repair node %d: %w", i, err)
	case ok == 2:
		return fmt.Errorf("%w: node %d's lost stamp changed during the repair (another client repaired it, "+
			"or it lost its data again); nothing was written", errStampChanged, i)
	case ok != 1:
		return fmt.Errorf("%w: node %d lost its uuid during the repair; try again", ErrNodeIDConflict, i)
	}
	c.amnesiac[i].Store(false)
	c.knownMu.Lock()
	c.known[i] = u
	c.knownMu.Unlock()
	c.log.Info("redlock: node repaired", "node", i, "id", slices.Index(members, u), "counter", top+1)
	c.refreshList(ctx)
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
func (c *Client) takeUUID(ctx context.Context, i int, states []*nodeState, members []string, rc repairConfig) (string, error) {
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
		if rc.online && c.knownUUID(i) != own {
			// A copy of a live member (its promoted replica, its backup on
			// another machine) holds the member's uuid too: only a client
			// that saw this address hold it may give it back on its own.
			return "", errNotAdoptable
		}
		switch k := heldBy(states, own, i); {
		case k < 0:
			return own, nil
		case !emptied(i):
			return "", fmt.Errorf("%w: nodes %d and %d hold the same uuid; try again", ErrNodeIDConflict, i, k)
		}
	}
	if slices.Contains(states, nil) {
		return "", fmt.Errorf("%w: node %d lost its identity; every node must answer to repair it", ErrUnavailable, i)
	}
	var orphans []string
	for _, u := range members {
		if heldBy(states, u, i) < 0 {
			orphans = append(orphans, u)
		}
	}
	var u string
	if known := c.knownUUID(i); slices.Contains(orphans, known) {
		u = known
	} else if !rc.adopt {
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
			return "", fmt.Errorf("%w: no uuid of the roster is free for node %d", ErrNodeIDConflict, i)
		}
		u = orphans[rank]
	}
	k := &c.keys
	node := c.nodes[i]
	keys := []string{k.UUID, k.ID, k.Lost}
	got, err := nodescript.SwapUUID.Run(ctx, node, keys, own, u, states[i].stamp).Text()
	if err != nil {
		return "", fmt.Errorf("redlock: repair node %d: %w", i, err)
	}
	if got != u {
		return "", fmt.Errorf("%w: node %d changed during the repair; try again", ErrNodeIDConflict, i)
	}
	after, err := c.readAllStates(ctx, "repair")
	if err == nil {
		if j := heldBy(after, u, i); j >= 0 {
			err = fmt.Errorf("%w: another repair gave node %d's uuid to node %d; try again", ErrNodeIDConflict, i, j)
		}
	}
	if err != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.nodeTimeout)
		defer cancel()
		_ = nodescript.SwapUUID.Run(ctx, node, keys, u, "", states[i].stamp).Err()
		return "", err
	}
	return u, nil
}
