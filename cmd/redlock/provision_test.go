package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/node"
)

// provision runs `redlock provision` over urls with extra flags.
func provision(t *testing.T, urls []string, extra ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"provision", "--nodes", strings.Join(urls, ","),
		"--timeout", "2s"}, extra...), &out)
	return out.String(), err
}

// Issue 23, item 1: `redlock provision` over a provisioned deployment with
// a node down failed ("too few nodes answered"); it now checks the nodes
// that answer, exits 0, and names the node it could not check.
//
// On today's code (e1c99f5):
//
//	provision_test.go:40: exit 1 (context deadline exceeded), want 0
//
// (with --timeout 2s, and no deadline, the error is "provision: too few nodes answered [4 granted,
// 1 failed of 5: dial tcp ...: connect: connection refused (node 4)]").
func TestProvisionCommandWithANodeDown(t *testing.T) {
	g, urls := startAOFNodes(t, 5)
	if out, err := provision(t, urls); err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	if err := g[4].Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, err := provision(t, urls, "--timeout", "1s")
	if code := exitCode(err); code != 0 {
		t.Fatalf("exit %d (%v), want 0\n%s", code, err, out)
	}
	if !strings.Contains(out, "node 4: not checked") || !strings.Contains(out, "node 3: fencing id") {
		t.Errorf("output does not say node 4 was not checked:\n%s", out)
	}
	t.Log(out)
}

// Issue 23, item 2: a replica in the list was reported as "timed out"
// (go-redis retries READONLY until the node timeout ends) or, with a long
// timeout, as a failed claim. Provision now names it a replica, and the
// fix, before it writes anything.
//
// On today's code (e1c99f5):
//
//	provision_test.go:73: exit 1: redlock: provision (claim): too few nodes answered [2 granted, 1 failed of 3: READONLY You can't write against a read only replica. script: 52fbcb24feea586b7e2d29d5550a9da70d240033, on @user_script:10. (node 2)]; want it named a replica, with REPLICAOF NO ONE
func TestProvisionCommandNamesAReplica(t *testing.T) {
	master, err := node.StartProcess(context.Background(), node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	replica, err := node.StartProcess(context.Background(), node.Config{
		Args: []string{"--replicaof", "127.0.0.1", portOf(t, master.Addr())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Close() })
	_, urls := startAOFNodes(t, 2)
	urls = append(urls, "redis://"+replica.Addr())
	out, err := provision(t, urls)
	if err == nil || !strings.Contains(err.Error(), "node 2 is a replica of 127.0.0.1:"+portOf(t, master.Addr())) ||
		!strings.Contains(err.Error(), "REPLICAOF NO ONE") {
		t.Fatalf("exit %d: %v; want it named a replica, with REPLICAOF NO ONE\n%s", exitCode(err), err, out)
	}
	t.Log(err)
}

// Issue 23, item 3: a list with nodes of two deployments was diagnosed as a
// majority that lost its data, or a node to repair, and pointed to
// --reprovision-above, which would take nodes from their own deployment.
//
// On today's code (e1c99f5), for the three lists:
//
//	provision_test.go:113: list 0: redlock: node lost its fencing state: node 3 does not hold the deployment's roster; run Repair
//	    (a minority not intact: `redlock repair --node I`, or wait for the clients' online repair; a majority lost: `redlock provision --reprovision-above T`, docs/operations.md "A majority lost"); want the list named as mixing deployments, without reprovision or repair
//	provision_test.go:113: list 1: redlock: conflicting node ids: the roster has 3 nodes, the client 5; ...
//	provision_test.go:113: list 2: redlock: node lost its fencing state: no majority of the nodes holds one roster; a majority lost its data (docs/operations.md, "A majority lost")
//	    (a minority not intact: ...; a majority lost: `redlock provision --reprovision-above T`, ...); ...
func TestProvisionCommandNamesAMixedList(t *testing.T) {
	_, d1 := startAOFNodes(t, 5)
	_, d2 := startAOFNodes(t, 3)
	_, blank := startAOFNodes(t, 1)
	for _, d := range [][]string{d1, d2} {
		if out, err := provision(t, d); err != nil {
			t.Fatalf("provision: %v\n%s", err, out)
		}
	}
	for k, c := range []struct {
		list []string
		want string
	}{
		{[]string{d1[0], d1[1], d1[2], d2[0], d2[1]}, "nodes 0, 1, 2 belong to a deployment of 5 nodes"},
		{[]string{d1[0], d1[1], d2[0], d2[1], d2[2]}, "nodes 2, 3, 4 belong to another of 3 nodes"},
		{[]string{d1[0], d1[1], d2[0], d2[1], blank[0]}, "nodes 2, 3 belong to another of 3 nodes"},
	} {
		out, err := provision(t, c.list)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if !strings.Contains(msg, "the list mixes deployments") || !strings.Contains(msg, c.want) ||
			strings.Contains(msg, "--reprovision-above") || strings.Contains(msg, "redlock repair") {
			t.Errorf("list %d: %v; want the list named as mixing deployments (%q), without reprovision or repair\n%s",
				k, err, c.want, out)
		}
	}
}

// Issue 23, item 4 (last bullet): `redlock provision --reprovision-above 5`
// on a healthy deployment went ahead without a question, forgetting every
// node's identity. A recovery command on a healthy deployment now needs
// --force; without it, provision refuses, changes nothing and exits 2.
//
// On today's code (e1c99f5):
//
//	provision_test.go:146: exit 0 (<nil>), want 2: a healthy deployment was reprovisioned without --force
func TestReprovisionOfAHealthyDeploymentNeedsForce(t *testing.T) {
	g, urls := startAOFNodes(t, 3)
	if out, err := provision(t, urls); err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	lockNames(t, g, time.Second, "a")
	cl := g.NewClients()
	defer node.CloseClients(cl)
	counters := func() []string {
		var v []string
		for _, c := range cl {
			v = append(v, c.Get(context.Background(), "redlock:fence:counter").Val()+"/"+
				c.Get(context.Background(), "redlock:node-uuid").Val())
		}
		return v
	}
	before := counters()
	out, err := provision(t, urls, "--reprovision-above", "5")
	if code := exitCode(err); code != 2 {
		t.Fatalf("exit %d (%v), want 2: a healthy deployment was reprovisioned without --force\n%s", code, err, out)
	}
	if !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "intact") {
		t.Errorf("refusal does not say why, or how to insist: %v", err)
	}
	if after := counters(); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("refused, but the nodes changed: %v, then %v", before, after)
	}
	out, err = provision(t, urls, "--reprovision-above", "5", "--force")
	if err != nil || !strings.Contains(out, "reprovisioned: every later token exceeds 5") {
		t.Errorf("with --force: %v\n%s", err, out)
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// provision exits with exec's codes for the same causes (issue 35: it
// exited 1 on a node list that was not the deployment's, where exec exits
// 78): 78 for a list that mixes two deployments' nodes, 69 when no node
// answers.
func TestProvisionCommandExitCodes(t *testing.T) {
	g, urls := startAOFNodes(t, 3)
	_, other := startAOFNodes(t, 3)
	for _, d := range [][]string{urls, other} {
		if out, err := provision(t, d); err != nil {
			t.Fatalf("provision: %v\n%s", err, out)
		}
	}
	mixed := []string{urls[0], urls[1], other[2]}
	if out, err := provision(t, mixed); exitCode(err) != 78 {
		t.Errorf("provision over two deployments' nodes: exit %d (%v), want 78\n%s", exitCode(err), err, out)
	}
	for _, n := range g {
		if err := n.Kill(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := provision(t, urls, "--timeout", "1s"); exitCode(err) != 69 {
		t.Errorf("provision with every node down: exit %d (%v), want 69\n%s", exitCode(err), err, out)
	}
}
