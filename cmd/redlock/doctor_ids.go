package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// readNodeIDs asks the library which nodes are intact: their fencing id,
// or -1. Only reachable nodes are asked, and a server listed twice only
// once (the library refuses it; doctor reports it as not independent).
func readNodeIDs(ctx context.Context, clients []redis.UniversalClient, facts []nodeFacts, prefix string, timeout time.Duration) error {
	// Every node is asked, the unreachable ones too: the node list is
	// judged against the deployment's roster over the whole list, and a
	// node down must not read as a list too short.
	var asked []redis.UniversalClient
	var idx []int
	seen := map[string]bool{}
	for i, f := range facts {
		if f.RunID == "" || !seen[f.RunID] {
			seen[f.RunID] = true
			asked = append(asked, clients[i])
			idx = append(idx, i)
		}
	}
	if len(asked) == 0 {
		return nil
	}
	c, err := redlock.New(asked, redlock.WithKeyPrefix(prefix), redlock.WithoutFencing(),
		redlock.WithNodeTimeout(timeout), redlock.WithTTL(3*timeout))
	if err != nil {
		return err
	}
	defer c.Close()
	ids, err := c.NodeIDs(ctx)
	var qe *redlock.QuorumError
	switch {
	case errors.As(err, &qe) && errors.Is(err, redlock.ErrUnavailable) && ids != nil:
		// Some nodes did not answer: the others' ids stand, and the silent
		// ones are reported as unreachable by their own checks.
		for k, i := range idx {
			if qe.Nodes[k].Outcome == redlock.NodeGranted {
				id := ids[k]
				facts[i].NodeID = &id
			}
		}
		return nil
	case err != nil:
		return err
	}
	for k, i := range idx {
		id := ids[k]
		facts[i].NodeID = &id
	}
	return nil
}

// judgeNodeIDs reports which nodes count in fenced quorums, why the others
// do not, and what brings them back.
func judgeNodeIDs(facts []nodeFacts, readErr error, add func(int, string, status, string, ...any)) {
	var wrongList *redlock.NodeListError
	switch {
	case errors.As(readErr, &wrongList):
		add(-1, "node list", statusFail, "these nodes are not one deployment's: %s. Every client, and doctor, "+
			"must list each node of the deployment once; fenced clients over this list refuse every lock "+
			"(ErrWrongNodeList). Repair cannot fix a list, and no node here should be repaired before it is fixed",
			strings.Join(wrongList.Problems, "; "))
		return
	case readErr != nil:
		add(-1, "node ids", statusWarn, "cannot read the nodes' fencing state: %v", readErr)
		return
	}
	n := len(facts)
	maj := n/2 + 1
	intact, provisioned := 0, false
	var claimed, rostered []string
	var longest time.Duration
	for i, f := range facts {
		if ff := f.Fencing; ff != nil {
			provisioned = provisioned || ff.IDMarker != nil
			if ff.HasUUID {
				claimed = append(claimed, fmt.Sprint(i))
			}
			if ff.HasRoster {
				rostered = append(rostered, fmt.Sprint(i))
			}
		}
		if f.NodeID != nil && *f.NodeID >= 0 {
			intact++
			if f.Fencing != nil {
				longest = max(longest, f.Fencing.MaxTTL)
			}
		}
	}
	if !provisioned && len(claimed) > 0 {
		if unread := countFacts(facts, func(f nodeFacts) bool { return f.Fencing == nil }); unread > 0 {
			// A node doctor could not read may hold an id, and tokens:
			// then the claims were restored from a snapshot, not left by
			// a provisioning to finish.
			add(-1, "node ids", statusFail, "no node doctor could read holds a fencing id (nodes %s hold a uuid "+
				"claim), and %d could not be read: if one of them holds an id, the deployment was provisioned and "+
				"these nodes lost their ids; if none does, provisioning did not finish. Run doctor again once every "+
				"node answers, before `redlock provision`", strings.Join(claimed, ", "), unread)
			return
		}
		// No node ever held an id, so no token was ever issued: nothing
		// was lost, and provisioning carries on from the claims.
		began := "nodes " + strings.Join(claimed, ", ") + " hold a uuid claim"
		if len(rostered) > 0 {
			began += ", nodes " + strings.Join(rostered, ", ") + " the roster"
		}
		add(-1, "node ids", statusFail, "not provisioned: provisioning began (%s) but did not finish, and no node "+
			"holds a fencing id, so every fenced lock fails (redlock exec exits 69) and no token was issued since it "+
			"began. Nothing to repair: run `redlock provision` while every node is up; it carries on from the claims "+
			"(an interrupted reprovision too: its counters are already raised)", began)
		return
	}
	if !provisioned {
		if countFacts(facts, func(f nodeFacts) bool { return f.NodeID != nil }) > 0 {
			add(-1, "node ids", statusFail, "not provisioned: no node holds a fencing identity, so every fenced lock "+
				"fails (ErrNotProvisioned; redlock exec exits 69). Run `redlock provision` once, while every node is up. "+
				"If this deployment was in use, its nodes all lost their data: docs/operations.md, \"A majority lost\"")
		}
		return
	}
	seen := map[int]int{}
	var out []string
	for i, f := range facts {
		switch {
		case f.NodeID == nil:
		case *f.NodeID >= 0:
			if j, dup := seen[*f.NodeID]; dup {
				add(i, "node id", statusFail, "fencing node id %d is also node %d's: tokens are not unique "+
					"(a node restored from another's data?); repair it", *f.NodeID, j)
				continue
			}
			seen[*f.NodeID] = i
			detail := fmt.Sprintf("fencing node id %d", *f.NodeID)
			if f.Fencing != nil {
				detail += fmt.Sprintf(", counter %d", f.Fencing.Counter)
			}
			add(i, "node id", statusOK, "%s", detail)
		default:
			out = append(out, fmt.Sprint(i))
			why, remedy := notIntact(i, f)
			// Without an intact majority, Provision gives no ids through a
			// repair: the deployment's verdict is the remedy.
			if remedy == "" || intact < maj {
				remedy = repairAdvice(i, f, longest)
				if intact < maj {
					remedy = "No majority of the nodes is intact, so no repair can bring it back: see the deployment's " +
						"\"node ids\" finding."
				}
			}
			add(i, "node id", statusFail, "%s: not intact until repaired, and left out of fenced quorums. %s", why, remedy)
		}
	}
	switch {
	case len(out) > n-maj:
		var top int64
		for _, f := range facts {
			if f.Fencing != nil {
				top = max(top, f.Fencing.Counter)
			}
		}
		add(-1, "node ids", statusFail, "%d of %d nodes are not intact (nodes %s), so no majority is: fenced locks fail, "+
			"and no repair can bring the nodes back (it reads an intact majority). Follow docs/operations.md, "+
			"\"A majority lost\": `redlock provision --reprovision-above T`, with T at least the highest token any "+
			"store accepted. If a majority of the nodes kept every write they acknowledged (restarted with appendfsync "+
			"always, not emptied or promoted), every token returned so far is below %d (the highest counter %d, plus one, "+
			"times 256)", len(out), n, strings.Join(out, ", "), (top+1)*256, top)
	case len(out) > 0:
		add(-1, "node ids", statusWarn, "%d of %d nodes are intact, a majority: fenced locks work. Out until repaired: "+
			"node %s (restart no other node before it is back)", intact, n, strings.Join(out, ", node "))
	default:
		add(-1, "node ids", statusOK, "%d nodes carry distinct fencing ids and are intact", intact)
	}
}

// notIntact says why node i does not count, from what it stores, and the
// remedy when it is not a repair.
func notIntact(i int, f nodeFacts) (why, remedy string) {
	ff := f.Fencing
	switch {
	case ff == nil || ff.Error != "" && ff.IDMarker == nil && !ff.HasUUID:
		return "its fencing keys could not be read", ""
	case ff.IDMarker != nil && ff.RecordedReplID != "" && ff.RecordedReplID != f.ReplID:
		return fmt.Sprintf("restarted or promoted (it serves under replication id %.8s, not the %.8s it was "+
			"provisioned under, and may lack its last writes)", f.ReplID, ff.RecordedReplID), ""
	case ff.IDMarker == nil && ff.HasRoster && ff.HasUUID:
		return "holds the roster but no id (provisioning did not finish on it, or it was restored from a " +
				"snapshot taken then)", fmt.Sprintf("`redlock provision` gives it its id through a repair, which "+
				"waits out the delayed restart (or `redlock repair --node %d --wait`).", i)
	case ff.IDMarker == nil:
		return "lost its data (amnesiac; it holds no fencing id while other nodes do)", ""
	}
	return "its fencing state changed while doctor read it", ""
}

// repairAdvice is the remedy for a node a repair brings back.
func repairAdvice(i int, f nodeFacts, longest time.Duration) string {
	since := "its delay starts when a client or a repair first finds it out"
	if ff := f.Fencing; ff != nil && ff.OutSince > 0 && !f.NodeTime.IsZero() {
		since = fmt.Sprintf("it has been out for %v", f.NodeTime.Sub(time.UnixMilli(ff.OutSince)).Round(time.Second))
	}
	adopt := ""
	if ff := f.Fencing; ff != nil && !ff.HasUUID {
		adopt = " --adopt"
	}
	advice := fmt.Sprintf("The repair waits until the node has been out for the longest TTL in use (%v; %s): it may "+
		"have lost lock keys that clients still hold (the delayed restart). Clients that saw it in the deployment "+
		"then repair it online; or run `redlock repair --node %d --wait%s`", longest, since, i, adopt)
	if adopt != "" {
		advice += ". It holds no identity at all, so doctor cannot tell a member that lost its data from a " +
			"stranger listed in a member's place: --adopt gives it the member no node holds. Use it only if this " +
			"node stands for that member and the server that held it will never serve again; otherwise fix the " +
			"node list (docs/operations.md, \"Replacing a node\")"
	}
	return advice
}

func countFacts(facts []nodeFacts, pred func(nodeFacts) bool) int {
	n := 0
	for _, f := range facts {
		if pred(f) {
			n++
		}
	}
	return n
}
