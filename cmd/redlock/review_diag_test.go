package main

import (
	"context"
	"strings"
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
)

// Review of issue 23, item 4 (adversarial): doctor on a deployment that was
// provisioned and issued tokens, whose nodes 1 and 2 (a majority) came back
// from a snapshot taken while it was being provisioned (uuid and roster, no
// id; the root package's TestProvisionOfAMajorityRestoredFromAPreIDSnapshot
// shows what `redlock provision` then does: tokens go backwards).
//
//   - Node 0, which kept its id and counter, unreachable, and the snapshot
//     one step older (uuid claims only): doctor decides from
//     the nodes it could read that "no node holds a fencing id ... no token
//     was issued since it began. Nothing to repair: run `redlock provision`".
//     A node it could not read may hold an id: it cannot say no token was
//     issued.
//   - Every node up: each restored node's advice is "`redlock provision`
//     gives it its id through a repair, which waits out the delayed
//     restart", while the deployment's verdict is that no majority is intact.
//     With ids on a minority, Provision does not repair: it wrote the ids at
//     once, with no counters.
//
// On ce151f8:
//
//	review_diag_test.go:67: node 1: node id fail "holds the roster but no id (...): not intact until repaired, and left out of fenced quorums. `redlock provision` gives it its id through a repair, ..." while no majority is intact
//	review_diag_test.go:82: node 0 down: node ids fail "not provisioned: provisioning began (nodes 1, 2 hold a uuid claim) but did not finish, and no node holds a fencing id, ... and no token was issued since it began. Nothing to repair: run `redlock provision` while every node is up; ..."
func TestReviewDoctorOnAMajorityRestoredFromAPreIDSnapshot(t *testing.T) {
	g, urls := startAOFNodes(t, 3)
	if out, err := provision(t, urls); err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	cl := g.NewClients()
	defer node.CloseClients(cl)
	ctx := context.Background()
	c, err := redlock.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		l, err := c.TryLock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	for _, i := range []int{1, 2} {
		u, r := cl[i].Get(ctx, "redlock:node-uuid").Val(), cl[i].Get(ctx, "redlock:node-roster").Val()
		if err := cl[i].FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		cl[i].Set(ctx, "redlock:node-uuid", u, 0)
		cl[i].Set(ctx, "redlock:node-roster", r, 0)
	}

	rep, _ := doctor(t, urls)
	for _, i := range []int{1, 2} {
		if f := find(t, rep, i, "node id"); strings.Contains(f.Detail, "`redlock provision`") {
			t.Errorf("node %d: node id %s %q while no majority is intact", i, f.Status, f.Detail)
		}
	}

	// A snapshot from one step earlier (the uuid claims only), and node 0,
	// the one node that kept its id, unreachable.
	for _, i := range []int{1, 2} {
		cl[i].Del(ctx, "redlock:node-roster")
	}
	if err := g[0].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	rep, _ = doctor(t, urls)
	if f := find(t, rep, -1, "node ids"); strings.Contains(f.Detail, "no token was issued") ||
		strings.Contains(f.Detail, "Nothing to repair") {
		t.Errorf("node 0 down: node ids %s %q", f.Status, f.Detail)
	}
}

// Review of issue 23, item 4 (adversarial; the fault predates the change):
// doctor on a healthy, provisioned deployment with one node of three down
// says the node LIST is wrong ("the deployment has 3 nodes (its roster),
// the list 2 ... fenced clients over this list refuse every lock ... no node
// here should be repaired"): readNodeIDs asks a client built over the
// reachable nodes only, and the library's list check compares the roster
// with that client's 2 nodes. An operator told to fix a correct list while
// a node is down is sent the wrong way (and a client over these 3 nodes
// locks fine).
//
// On ce151f8 (and e1c99f5):
//
//	review_diag_test.go:110: node 0 down: node list fail "these nodes are not one deployment's: the deployment has 3 nodes (its roster), the list 2: list every node of the deployment, once. ..."
func TestReviewDoctorWithANodeDownBlamesNoList(t *testing.T) {
	g, urls := startAOFNodes(t, 3)
	if out, err := provision(t, urls); err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	if err := g[0].Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep, _ := doctor(t, urls)
	for _, f := range rep.Findings {
		if f.Node == nil && f.Check == "node list" {
			t.Errorf("node 0 down: node list %s %q", f.Status, f.Detail)
		}
	}
}
