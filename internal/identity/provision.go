package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
)

// Report is what a Provision that succeeded checked: the root package's
// ProvisionReport (which documents its fields).
type Report struct {
	IDs       []int
	Unchecked []round.NodeResult
}

// ProvisionWithReport provisions the deployment, or checks it (the root
// package's Provision documents how), and says which nodes it checked.
func (d *Deployment) ProvisionWithReport(ctx context.Context) (*Report, error) {
	if !d.cfg.Fencing {
		return &Report{}, nil
	}
	ctx, cancel := d.adminContext(ctx)
	defer cancel()
	states, t, err := d.readStates(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.provisionable(states); err != nil {
		return nil, err
	}
	hasID := func(s *nodeState) bool { return s != nil && s.id >= 0 }
	switch {
	case t.Granted() < len(d.nodes) && !slices.ContainsFunc(states, hasID):
		return nil, d.quorumError(&verdict.Failure{Op: "provision", Kind: kind.ErrUnavailable, Cause: errNewNeedsAll, Nodes: t.Snapshot()})
	case t.Granted() < len(d.nodes) && !rosterMajority(states, len(d.nodes)):
		// The silent nodes may hold what would make a majority: no
		// verdict on the deployment without them.
		return nil, d.quorumError(&verdict.Failure{Op: "provision", Kind: kind.ErrUnavailable, Cause: errProvisionedNeedsMajority, Nodes: t.Snapshot()})
	case !slices.ContainsFunc(states, hasID):
		// Until some node has an id, no token exists, and provisioning
		// can be carried on from wherever another provisioner left it.
		if states, err = d.claimRoster(ctx, states); err != nil {
			return nil, err
		}
	}
	if err := d.assignIDs(ctx, states); err != nil {
		return nil, err
	}
	d.refreshList(ctx) // the ids and roster the attempts count votes by
	return d.provisionReport(ctx)
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
func (d *Deployment) provisionable(states []*nodeState) error {
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
func (d *Deployment) provisionReport(ctx context.Context) (*Report, error) {
	states, t, err := d.readStates(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.provisionable(states); err != nil {
		return nil, err
	}
	if v := judgeList(states, len(d.nodes)); v.Err != nil {
		return nil, v.Err
	}
	rep := &Report{IDs: make([]int, len(states))}
	var silent []string
	for i, s := range states {
		rep.IDs[i] = -1
		if s != nil && s.intact() {
			rep.IDs[i] = s.id
		}
		if r := t.Results[i]; r.Outcome != round.NodeGranted {
			rep.Unchecked = append(rep.Unchecked, r)
			silent = append(silent, fmt.Sprintf("node %d (%v)", i, r.Err))
		}
	}
	if len(silent) > 0 {
		d.log.Warn("redlock: provision: the deployment is provisioned; these nodes did not answer, and "+
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
func (d *Deployment) repairMissing(ctx context.Context, missing []int) error {
	var first error
	for _, i := range missing {
		if err := d.repair(ctx, i, RepairConfig{}); err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		return nil
	}
	states, err := d.readAllStates(ctx, "provision")
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
