package identity

import (
	"fmt"
	"slices"
	"strings"
)

// What a check of the node list finds wrong with a list, in sentences that
// name the nodes and what to fix (nodelist.go).

// judgeList checks what the nodes that answered hold (nil: no answer).
func judgeList(states []*nodeState, n int) *View {
	v := &View{Roster: "", IDs: make([]int, n), Seen: make([]bool, n)}
	var problems []string
	servers := map[string][]int{}
	rosters := map[string][]int{}
	for i, s := range states {
		v.IDs[i] = -1
		if s == nil {
			continue
		}
		v.Seen[i] = true
		if s.runID != "" {
			servers[s.runID] = append(servers[s.runID], i)
		}
		if s.roster != "" {
			rosters[s.roster] = append(rosters[s.roster], i)
		}
	}
	for id, nodes := range servers {
		if len(nodes) > 1 {
			problems = append(problems, fmt.Sprintf("%s are one server (run_id %.12s): list each server once",
				nodeNames(nodes), id))
		}
	}
	switch len(rosters) {
	case 0: // not provisioned, or every node that answered lost its data: the attempts say which
	case 1:
		for r := range rosters {
			v.Roster = r
		}
		if k := strings.Count(v.Roster.(string), ",") + 1; k != n {
			problems = append(problems, fmt.Sprintf("the deployment has %d nodes (its roster), the list %d: "+
				"list every node of the deployment, once", k, n))
		}
	default:
		if p := mixedDeployments(states); p != "" {
			problems = append(problems, p)
			break
		}
		var groups []string
		for _, nodes := range rosters {
			groups = append(groups, nodeNames(nodes))
		}
		slices.Sort(groups)
		problems = append(problems, fmt.Sprintf("%s each hold another roster of one deployment (their uuids "+
			"overlap): its provisioning was interrupted by a node's data loss", strings.Join(groups, " and ")))
	}
	holder := map[int]int{}
	for i, s := range states {
		if s == nil || !s.intact() || s.roster != v.Roster {
			continue
		}
		if j, dup := holder[s.id]; dup {
			problems = append(problems, fmt.Sprintf("nodes %d and %d both hold fencing id %d (one restored from "+
				"the other's data?): each member of the deployment must be listed once", j, i, s.id))
			continue
		}
		holder[s.id] = i
		v.IDs[i] = s.id
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		v.Err = &NodeListError{Problems: problems}
	}
	return v
}

// mixedDeployments says which nodes belong to which deployment if the
// nodes that answered (nil: no answer) belong to more than one, "" if not.
// Rosters that share a member are one deployment's (a provisioning
// interrupted by a data loss leaves two); rosters that share none are two
// deployments', whose nodes no repair may mix. A node holding only a uuid
// belongs to the deployment whose roster names it; a node holding nothing
// is named by none.
func mixedDeployments(states []*nodeState) string {
	type deployment struct {
		members map[string]bool
		size    int // of its first roster
		tag     string
		nodes   []int
	}
	var ds []*deployment
	find := func(uuid string) *deployment {
		for _, d := range ds {
			if d.members[uuid] {
				return d
			}
		}
		return nil
	}
	for _, s := range states {
		if s == nil || s.roster == "" {
			continue
		}
		members := strings.Split(s.roster, ",")
		d := find(members[0])
		for _, m := range members[1:] {
			if d == nil {
				d = find(m)
			}
		}
		if d == nil {
			d = &deployment{members: map[string]bool{}, size: len(members), tag: members[0]}
			ds = append(ds, d)
		}
		for _, m := range members {
			d.members[m] = true
		}
	}
	if len(ds) < 2 {
		return ""
	}
	for i, s := range states {
		if s == nil {
			continue
		}
		if d := find(s.uuid); d != nil {
			d.nodes = append(d.nodes, i)
		}
	}
	var parts []string
	for k, d := range ds {
		if len(d.nodes) == 0 {
			continue
		}
		of := "a deployment"
		if k > 0 {
			of = "another"
		}
		verb := "belong"
		if len(d.nodes) == 1 {
			verb = "belongs"
		}
		parts = append(parts, fmt.Sprintf("%s %s to %s of %d nodes (roster %.8s…)", nodeNames(d.nodes), verb, of, d.size, d.tag))
	}
	return "the list mixes deployments: " + strings.Join(parts, ", ") + "; list the nodes of one deployment " +
		"(no repair or reprovision fixes a list: either would take a node from its own deployment)"
}

// replicaProblems names the nodes that answered as replicas: a replica
// refuses every write (READONLY), and holds its master's data, so it is
// not an independent member of a deployment.
func replicaProblems(states []*nodeState) []string {
	var problems []string
	for i, s := range states {
		if s != nil && s.role == "slave" {
			problems = append(problems, fmt.Sprintf("node %d is a replica of %s, not a master: it refuses writes "+
				"(READONLY) and holds its master's data; list independent masters only, or make it one "+
				"(REPLICAOF NO ONE) if it is meant to be", i, s.master))
		}
	}
	return problems
}

func nodeNames(nodes []int) string {
	if len(nodes) == 1 {
		return fmt.Sprintf("node %d", nodes[0])
	}
	s := make([]string, len(nodes))
	for k, i := range nodes {
		s[k] = fmt.Sprint(i)
	}
	return "nodes " + strings.Join(s, ", ")
}
