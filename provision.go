package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quorumlock/redlock/internal/round"
)

// Provision gives every node of a new deployment its fencing identity, and
// checks the identity of a deployment that has one. It is a deploy-time
// step (`redlock provision`, or a one-off program), not part of a
// service's start: locks need no call to it. Many clients may provision at
// once, and Provision may be called again later: it converges, and on a
// deployment that is already provisioned it changes nothing.
//
// A deployment not yet provisioned needs every node to answer: its roster
// names every member by the uuid the member claimed, and ids are the ranks
// in that roster, written only once every node holds it (docs/fencing.md,
// "Node identity"). A member that did not claim cannot be named, and
// adding it later would change every rank. A deployment already
// provisioned (a majority of its nodes holds one roster and ids) needs
// only a majority: Provision checks the nodes that answer, succeeds if they
// are the deployment's and intact, and logs (WithLogger) which nodes it
// could not check; ProvisionWithReport returns them. A node that was
// silent is checked by every client at its first reply (the node list
// check), and by `redlock doctor`.
//
// Before anything is written, it refuses a list that is not one
// deployment's masters with a *NodeListError (ErrWrongNodeList): a replica
// (it refuses writes, READONLY), or nodes of two deployments, which it
// names; and one server listed twice with ErrDuplicateNode.
// It returns an error matching ErrAmnesia when some nodes lost their
// identity in a provisioned deployment (Repair brings each back, and clients
// do so by themselves once a majority is intact), and ErrNodeIDConflict when
// the nodes disagree in a way no repair fixes alone. Once any node holds an
// id, it writes ids only to nodes that hold the deployment's roster: a
// deployment that lost a majority is never provisioned again (see
// Reprovision).
//
// Fenced acquisitions on a deployment nobody provisioned fail with
// ErrNotProvisioned. Without fencing (WithoutFencing) Provision does
// nothing.
func (c *Client) Provision(ctx context.Context) error {
	_, err := c.ProvisionWithReport(ctx)
	return err
}

// ProvisionReport is what a Provision that succeeded checked.
type ProvisionReport struct {
	// IDs holds each node's fencing id after Provision (read once more
	// at its end), -1 for a node that did not answer that read or was not
	// intact then. Nil without fencing.
	IDs []int
	// Unchecked are the nodes that did not answer (NodeResult.Err says
	// why): Provision could not check that they hold the deployment's
	// roster and an intact id. Empty when every node answered.
	Unchecked []NodeResult
}

// ProvisionWithReport is Provision, and says which nodes it checked.
func (c *Client) ProvisionWithReport(ctx context.Context) (*ProvisionReport, error) {
	if !c.cfg.fencing {
		return &ProvisionReport{}, nil
	}
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	states, t, err := c.readStates(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.provisionable(states); err != nil {
		return nil, err
	}
	hasID := func(s *nodeState) bool { return s != nil && s.id >= 0 }
	switch {
	case t.Granted() < len(c.nodes) && !slices.ContainsFunc(states, hasID):
		return nil, &QuorumError{Op: "provision", Kind: ErrUnavailable, Cause: errNewNeedsAll, Nodes: t.Snapshot()}
	case t.Granted() < len(c.nodes) && !rosterMajority(states, len(c.nodes)):
		// The silent nodes may hold what would make a majority: no
		// verdict on the deployment without them.
		return nil, &QuorumError{Op: "provision", Kind: ErrUnavailable, Cause: errProvisionedNeedsMajority, Nodes: t.Snapshot()}
	case !slices.ContainsFunc(states, hasID):
		// Until some node has an id, no token exists, and provisioning
		// can be carried on from wherever another provisioner left it.
		if states, err = c.claimRoster(ctx, states); err != nil {
			return nil, err
		}
	}
	if err := c.assignIDs(ctx, states); err != nil {
		return nil, err
	}
	c.refreshList(ctx) // the ids and roster the attempts count votes by
	return c.provisionReport(ctx)
}

var (
	errNewNeedsAll = errors.New("a deployment not yet provisioned needs every node: its roster names " +
		"every member")
	errProvisionedNeedsMajority = errors.New("checking a provisioned deployment needs a majority of its " +
		"nodes answering with its roster")
)

// rosterMajority reports whether a majority of the n nodes answered
// (states[i] != nil) with one roster.
func rosterMajority(states []*nodeState, n int) bool {
	count := map[string]int{}
	for _, s := range states {
		if s != nil && s.roster != "" {
			count[s.roster]++
			if count[s.roster] >= round.Majority(n) {
				return true
			}
		}
	}
	return false
}

// provisionable refuses, before anything is written, a list that is not
// one deployment's masters.
func (c *Client) provisionable(states []*nodeState) error {
	if err := distinctServers(states); err != nil {
		return err
	}
	problems := replicaProblems(states)
	if p := mixedDeployments(states); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return &NodeListError{Problems: problems}
	}
	return nil
}

// provisionReport reads every node once more, and reports the ids and the
// nodes that did not answer. It judges the list again: a node made a
// replica of another member while Provision ran holds that member's
// identity, which the id step finds already written, and succeeds on. A
// node that lost its state since is for the clients and doctor to find.
func (c *Client) provisionReport(ctx context.Context) (*ProvisionReport, error) {
	states, t, err := c.readStates(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.provisionable(states); err != nil {
		return nil, err
	}
	if v := judgeList(states, len(c.nodes)); v.Err != nil {
		return nil, v.Err
	}
	rep := &ProvisionReport{IDs: make([]int, len(states))}
	var silent []string
	for i, s := range states {
		rep.IDs[i] = -1
		if s != nil && s.intact() {
			rep.IDs[i] = s.id
		}
		if r := t.Results[i]; r.Outcome != NodeGranted {
			rep.Unchecked = append(rep.Unchecked, r)
			silent = append(silent, fmt.Sprintf("node %d (%v)", i, r.Err))
		}
	}
	if len(silent) > 0 {
		c.log.Warn("redlock: provision: the deployment is provisioned; these nodes did not answer, and "+
			"were not checked: each client checks them at their first reply, and so does `redlock doctor`",
			"unchecked", strings.Join(silent, ", "))
	}
	return rep, nil
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
