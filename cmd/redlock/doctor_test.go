package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"

	"github.com/quorumlock/redlock/node"
)

func startAOFNodes(t *testing.T, n int) (node.Group, []string) {
	t.Helper()
	g, err := node.StartProcesses(context.Background(), n, node.Config{Persistence: node.PersistAOFAlways})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	urls := make([]string, n)
	for i, nd := range g {
		urls[i] = "redis://" + nd.Addr()
	}
	return g, urls
}

// lockNames takes and releases a fenced lock on each name, with ttl: the
// nodes then record ttl as a TTL in use.
func lockNames(t *testing.T, g node.Group, ttl time.Duration, names ...string) {
	t.Helper()
	cl := g.NewClients()
	defer node.CloseClients(cl)
	c, err := redlock.New(cl, redlock.WithTTL(ttl), redlock.WithNodeTimeout(ttl/5))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, name := range names {
		l, err := c.TryLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func doctor(t *testing.T, urls []string, extra ...string) (*doctorReport, int) {
	t.Helper()
	var out bytes.Buffer
	args := append([]string{"doctor", "--json", "--nodes", strings.Join(urls, ","), "--timeout", "2s"}, extra...)
	err := run(context.Background(), args, &out)
	var rep doctorReport
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("doctor output is not JSON (%v, err %v):\n%s", jerr, err, out.String())
	}
	return &rep, exitCode(err)
}

// find returns the finding of check for node (-1: the deployment).
func find(t *testing.T, rep *doctorReport, nodeIdx int, check string) finding {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Check == check && (nodeIdx < 0 && f.Node == nil || f.Node != nil && *f.Node == nodeIdx) {
			return f
		}
	}
	t.Fatalf("no %q finding for node %d in %+v", check, nodeIdx, rep.Findings)
	return finding{}
}

func TestDoctorPassesAHealthyDeployment(t *testing.T) {
	g, urls := startAOFNodes(t, 3)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"provision", "--nodes", strings.Join(urls, ",")}, &out); err != nil {
		t.Fatalf("provision: %v\n%s", err, out.String())
	}
	// Three fenced names: each leaves its fence:high key on the nodes that
	// answered its commit, a majority at least.
	lockNames(t, g, time.Second, "a", "b", "c")
	// A generous node timeout: the round-trip check must not warn on a
	// loaded CI machine, this test is about the rest.
	rep, code := doctor(t, urls, "--node-timeout", "2s")
	committed := int64(0)
	if code != 0 || rep.Failures != 0 {
		t.Fatalf("exit %d, %d failures: %+v", code, rep.Failures, rep.Findings)
	}
	for i := range 3 {
		for _, check := range []string{"reachable", "independent", "persistence", "eviction", "version",
			"cluster mode", "round trip", "node id", "memory", "fenced keys"} {
			if f := find(t, rep, i, check); f.Status != statusOK {
				t.Errorf("node %d %s: %s %s", i, check, f.Status, f.Detail)
			}
		}
		if rep.Nodes[i].RunID == "" || rep.Nodes[i].RTTMedian <= 0 || rep.Nodes[i].NodeID == nil {
			t.Errorf("node %d facts: %+v", i, rep.Nodes[i])
		}
		if ff := rep.Nodes[i].Fencing; ff == nil || !ff.ScanComplete || ff.FencedKeys > 3 || ff.Counter <= 0 {
			t.Errorf("node %d fencing facts: %+v", i, ff)
		} else {
			committed += ff.FencedKeys
		}
	}
	if committed < 3*2 {
		t.Errorf("%d fenced keys on the nodes, want each name's on a majority", committed)
	}
	for _, check := range []string{"node count", "quorum", "clock skew", "node ids"} {
		if f := find(t, rep, -1, check); f.Status != statusOK {
			t.Errorf("%s: %s %s", check, f.Status, f.Detail)
		}
	}
	if rep.Verdict != statusOK {
		t.Errorf("verdict %s", rep.Verdict)
	}

	// The human-readable form says the same.
	out.Reset()
	if err := run(context.Background(), []string{"doctor", "--nodes", strings.Join(urls, ","), "--node-timeout", "2s"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "verdict: OK") || !strings.Contains(out.String(), "appendfsync always") {
		t.Errorf("human output:\n%s", out.String())
	}
}

// A deployment with every mistake doctor knows of: each is reported on the
// right node, and doctor exits 1.
func TestDoctorFailsAnUnsafeDeployment(t *testing.T) {
	g, urls := startAOFNodes(t, 4)
	ctx := context.Background()
	cl := g.NewClients()
	defer node.CloseClients(cl)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, port0, _ := net.SplitHostPort(g[0].Addr())
	must(cl[3].Do(ctx, "REPLICAOF", "127.0.0.1", port0).Err())
	must(cl[1].ConfigSet(ctx, "maxmemory", "100mb").Err())
	must(cl[1].ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	must(cl[2].ConfigSet(ctx, "appendonly", "no").Err())
	must(cl[0].ConfigSet(ctx, "appendfsync", "everysec").Err())

	// Node 0 listed again under another name, and a node nobody listens on.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	deadAddr := dead.Addr().String()
	dead.Close()
	all := append(urls, "redis://localhost:"+port0, "redis://"+deadAddr)

	rep, code := doctor(t, all, "--node-timeout", "2s")
	if code != 1 || rep.Verdict != statusFail {
		t.Fatalf("exit %d, verdict %s: %+v", code, rep.Verdict, rep.Findings)
	}
	expect := []struct {
		node         int
		check        string
		status       status
		detailSubstr string
	}{
		{3, "independent", statusFail, "replica of node 0"},
		{0, "independent", statusWarn, "replicas"},
		{4, "independent", statusFail, "same server as node 0"},
		{1, "eviction", statusFail, "allkeys-lru"},
		{2, "persistence", statusFail, "appendonly no"},
		{0, "persistence", statusFail, "everysec"},
		{5, "reachable", statusFail, "unreachable"},
		{-1, "node count", statusWarn, "even"},
		{-1, "node ids", statusFail, "redlock provision"},
	}
	for _, e := range expect {
		f := find(t, rep, e.node, e.check)
		if f.Status != e.status || !strings.Contains(f.Detail, e.detailSubstr) {
			t.Errorf("node %d %s: %s %q, want %s containing %q", e.node, e.check, f.Status, f.Detail, e.status, e.detailSubstr)
		}
	}

	// Without fencing, a node without persistence is a warning: the
	// RedLock answer to it is a delayed restart.
	rep, _ = doctor(t, urls[:3], "--node-timeout", "2s", "--fencing=false")
	if f := find(t, rep, 2, "persistence"); f.Status != statusWarn {
		t.Errorf("without fencing, appendonly no: %s %s", f.Status, f.Detail)
	}
	if f := find(t, rep, 0, "persistence"); f.Status != statusWarn {
		t.Errorf("without fencing, appendfsync everysec: %s %s", f.Status, f.Detail)
	}
}

func TestDoctorBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"doctor", "--nodes", ""},
		{"doctor", "--nodes", "http://x"},
		{"doctor", "--bogus"},
	} {
		t.Setenv("REDLOCK_NODES", "")
		if err := run(context.Background(), args, &bytes.Buffer{}); exitCode(err) != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, exitCode(err), err)
		}
	}
}

// Revision 3 (issue 22, item 4): doctor over 3 of a deployment's 5 nodes
// exited 0 on 5e7ef93, and over a list with a stranger in a member's place
// advised `redlock repair --node 0 --wait`, which grafted the stranger in.
// Now the first fails on the node list, and the second advises a repair
// only with --adopt, saying what that vouches for.
func TestDoctorRefusesAWrongNodeList(t *testing.T) {
	_, urls := startAOFNodes(t, 5)
	ctx := context.Background()
	if err := run(ctx, []string{"provision", "--nodes", strings.Join(urls, ",")}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	rep, code := doctor(t, urls[:3])
	f := find(t, rep, -1, "node list")
	if code == 0 || f.Status != statusFail || !strings.Contains(f.Detail, "the deployment has 5 nodes (its roster), the list 3") {
		t.Errorf("doctor over 3 of 5 nodes: exit %d, %+v", code, f)
	}

	_, stranger := startAOFNodes(t, 1)
	rep, code = doctor(t, append(stranger, urls[1:]...))
	f = find(t, rep, 0, "node id")
	if code == 0 || !strings.Contains(f.Detail, "--adopt") || !strings.Contains(f.Detail, "stranger") {
		t.Errorf("doctor with a stranger in member 0's place: exit %d, %+v", code, f)
	}
}
