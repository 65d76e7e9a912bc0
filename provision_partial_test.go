package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// Issue 23, item 1: the Quick start called Provision before locking, and
// Provision needed every node, so one node of five down failed every start
// ("provision: too few nodes answered [4 granted, 1 failed of 5 ...]"). A
// deployment that is already provisioned is now checked on the nodes that
// answer: Provision succeeds while a majority of them holds the roster and
// its ids, and says which nodes it could not check. A deployment not yet
// provisioned still needs every node (its roster names every member).
//
// On today's code (e1c99f5):
//
//	provision_partial_test.go:36: Provision of a provisioned deployment with node 4 down: redlock: provision: too few nodes answered [4 granted, 1 failed of 5: dial tcp 127.0.0.1:41653: connect: connection refused (node 4)]
func TestProvisionOfAProvisionedDeploymentNeedsAMajority(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 5)
	ctx := context.Background()
	before, err := cl.newClient(t).NodeIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.nodes[4].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	c := cl.newClient(t, redlock.WithNodeTimeout(time.Second),
		redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err := c.Provision(ctx); err != nil {
		t.Fatalf("Provision of a provisioned deployment with node 4 down: %v", err)
	}
	if !strings.Contains(logs.String(), "were not checked") || !strings.Contains(logs.String(), "node 4 (") {
		t.Errorf("Provision did not log the node it could not check:\n%s", logs.String())
	}
	rep, err := c.ProvisionWithReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(before[:4:4], -1); !slices.Equal(rep.IDs, want) {
		t.Errorf("report ids %v, want %v", rep.IDs, want)
	}
	if len(rep.Unchecked) != 1 || rep.Unchecked[0].Node != 4 || rep.Unchecked[0].Err == nil {
		t.Errorf("unchecked %+v, want node 4 with its cause", rep.Unchecked)
	}
	l, err := c.TryLock(ctx, "after")
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock(ctx)

	// A majority must answer: with three of five down, nothing is checked.
	for _, i := range []int{2, 3} {
		if err := cl.nodes[i].Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Provision(ctx); !errors.Is(err, redlock.ErrUnavailable) {
		t.Errorf("Provision with 2 of 5 nodes up: %v, want ErrUnavailable", err)
	}
}

// Nodes that answer but are not the deployment's still fail, with the
// node list's error, although a node is down.
func TestProvisionWithANodeDownStillRefusesAWrongList(t *testing.T) {
	d1 := startCluster(t, 5)
	d2 := startCluster(t, 3)
	ctx := context.Background()
	if err := d1.nodes[4].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	// Node 3 of the list is a node of another deployment.
	list := slices.Clone(d1.clients)
	list[3] = d2.clients[0]
	c, err := redlock.New(list, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Provision(ctx)
	var nle *redlock.NodeListError
	if !errors.Is(err, redlock.ErrWrongNodeList) || !errors.As(err, &nle) {
		t.Fatalf("Provision with node 3 of another deployment and node 4 down: %v, want a *NodeListError", err)
	}
	t.Log(err)
}

// A deployment nobody provisioned needs every node: its roster names
// every member, and a member that did not claim its uuid cannot be named.
func TestProvisionOfANewDeploymentNeedsEveryNode(t *testing.T) {
	cl := startFreshCluster(t, 5)
	ctx := context.Background()
	if err := cl.nodes[4].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	c := cl.newClient(t, redlock.WithNodeTimeout(time.Second))
	err := c.Provision(ctx)
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("Provision of a new deployment with node 4 down: %v, want ErrUnavailable", err)
	}
	t.Log(err)
	for i, cc := range cl.inspect[:4] {
		if n, err := cc.Exists(ctx, "redlock:node-uuid", "redlock:node-roster").Result(); err != nil || n != 0 {
			t.Errorf("node %d holds %d identity keys (%v): nothing may be claimed before every node answers", i, n, err)
		}
	}
}

// Issue 23, item 2: with the default node timeout (50 ms), as in the
// Quick start, a replica in the list was reported as "timed out": go-redis
// retries READONLY until the node timeout ends. Provision now names it a
// replica before it writes anything.
//
// On today's code (e1c99f5):
//
//	provision_partial_test.go:134: Provision with node 2 a replica: redlock: provision (claim): too few nodes answered [2 granted, 1 timed out of 3], want a *NodeListError naming node 2 a replica
func TestProvisionNamesAReplica(t *testing.T) {
	cl := startFreshCluster(t, 2)
	master := startFreshCluster(t, 1)
	replica := startNodes(t, 1, node.Config{Args: []string{"--replicaof", "127.0.0.1", port(t, master.nodes[0].Addr())}})
	c, err := redlock.New(append(slices.Clone(cl.clients), replica.clients[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Provision(context.Background())
	var nle *redlock.NodeListError
	if !errors.As(err, &nle) || !strings.Contains(err.Error(), "node 2 is a replica of 127.0.0.1:"+port(t, master.nodes[0].Addr())) {
		t.Fatalf("Provision with node 2 a replica: %v, want a *NodeListError naming node 2 a replica", err)
	}
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Review of issue 23, item 4 (adversarial): Provision refuses a replica
// only in its first read. A node that becomes a replica of another member
// after the claims (REPLICAOF between the claim and the roster steps, forced
// here) holds that member's uuid, roster and, once replicated, its id:
// the roster and id scripts write nothing on it (it already holds what they
// would write), so Provision succeeds, and reports the copy's id as node
// 2's own: two nodes with one fencing id, one a replica. Every client then
// refuses the list. Provision's final read (provisionReport) judges nothing.
//
// On ce151f8:
//
//	review_diag_test.go:260: Provision with node 2 made a replica of node 0 during it: <nil> (ids [2 1 2]), want a *NodeListError naming node 2 a replica
//
// Origin: the adversarial review of provisioning and diagnostics.
func TestProvisionWithANodeMadeAReplicaDuringIt(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startFreshCluster(t, 3)
	ctx := context.Background()
	waitKey := func(key string) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if cl.inspect[2].Exists(ctx, key).Val() == 1 {
				return
			}
		}
		t.Errorf("node 2 never replicated %s", key)
	}
	var once bool
	roster := beforeScript{"roster", func() {
		if once {
			return
		}
		once = true
		if err := cl.inspect[2].SlaveOf(ctx, "127.0.0.1", port(t, cl.nodes[0].Addr())).Err(); err != nil {
			t.Error(err)
		}
		waitKey("redlock:node-roster")
	}}
	assign := beforeScript{"assign", func() { waitKey("redlock:node-id") }}
	var clients []redis.UniversalClient
	for i, n := range cl.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		if i == 2 {
			rc.AddHook(roster)
			rc.AddHook(assign)
		}
		clients = append(clients, rc)
		defer rc.Close()
	}
	c, err := redlock.New(clients, redlock.WithNodeTimeout(12*time.Second), redlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := c.ProvisionWithReport(ctx)
	var nle *redlock.NodeListError
	if !errors.As(err, &nle) || !strings.Contains(err.Error(), "node 2 is a replica") {
		var ids []int
		if rep != nil {
			ids = rep.IDs
		}
		t.Errorf("Provision with node 2 made a replica of node 0 during it: %v (ids %v), want a *NodeListError "+
			"naming node 2 a replica", err, ids)
	}
}
