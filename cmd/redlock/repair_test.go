package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
)

// A restarted node (its data kept, a new replication id) shows as
// "restarted or promoted", not as a node that lost its data. A plain repair
// right after the restart refuses with exit 75 and says how long to wait
// (issue 11, item 3: repairing at once gave two holders within validity);
// --wait waits it out and repairs. A node restarted empty shows as lost,
// and --now repairs it at once.
func TestDoctorFindsANotIntactNodeAndRepairFixesIt(t *testing.T) {
	g, urls := startAOFNodes(t, 3)
	ctx := context.Background()
	nodes := strings.Join(urls, ",")
	if err := run(ctx, []string{"provision", "--nodes", nodes}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	lockNames(t, g, ttl, "job")
	if err := g[1].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g[1].Start(ctx); err != nil {
		t.Fatal(err)
	}

	rep, code := doctor(t, urls, "--node-timeout", "2s")
	f := find(t, rep, 1, "node id")
	if code != 1 || f.Status != statusFail {
		t.Fatalf("exit %d; node 1: %+v", code, f)
	}
	for _, want := range []string{"restarted or promoted", "longest TTL in use (2s", "repair --node 1"} {
		if !strings.Contains(f.Detail, want) {
			t.Errorf("node 1's finding %q does not say %q", f.Detail, want)
		}
	}
	if d := find(t, rep, -1, "node ids"); d.Status != statusWarn {
		t.Errorf("deployment: %+v, want a warning (a majority is intact)", d)
	}

	var out bytes.Buffer
	err := run(ctx, []string{"repair", "--nodes", nodes, "--node", "1"}, &out)
	if exitCode(err) != 75 || !strings.Contains(err.Error(), "Run again with --wait (it waits") {
		t.Fatalf("repair right after the restart: exit %d (%v), want 75 saying how long to wait", exitCode(err), err)
	}
	t.Logf("repair: %v", err)
	start := time.Now()
	out.Reset()
	if err := run(ctx, []string{"repair", "--nodes", nodes, "--node", "1", "--wait"}, &out); err != nil {
		t.Fatalf("repair --wait: %v\n%s", err, out.String())
	}
	if took := time.Since(start); !strings.Contains(out.String(), "waiting") || !strings.Contains(out.String(), "node 1 repaired") ||
		took > 3*ttl {
		t.Errorf("repair --wait took %v and said %q", took, out.String())
	}
	rep, code = doctor(t, urls, "--node-timeout", "2s")
	if code != 0 || find(t, rep, 1, "node id").Status != statusOK {
		t.Fatalf("after repair: exit %d, %+v", code, rep.Findings)
	}

	// Restarted empty: it lost its data. Without --adopt the repair refuses
	// (nothing on the node says it is member 2, not a stranger); with it,
	// --now repairs it at once.
	if err := g[2].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g[2].WipeData(); err != nil {
		t.Fatal(err)
	}
	if err := g[2].Start(ctx); err != nil {
		t.Fatal(err)
	}
	rep, _ = doctor(t, urls, "--node-timeout", "2s")
	if f := find(t, rep, 2, "node id"); f.Status != statusFail || !strings.Contains(f.Detail, "lost its data") {
		t.Errorf("node 2 restarted empty: %+v", f)
	}
	if !strings.Contains(find(t, rep, 2, "node id").Detail, "--adopt") {
		t.Errorf("doctor does not say that an emptied node needs --adopt: %+v", find(t, rep, 2, "node id"))
	}
	out.Reset()
	if err := run(ctx, []string{"repair", "--nodes", nodes, "--node", "2", "--now"}, &out); err == nil ||
		!strings.Contains(err.Error(), "--adopt") {
		t.Fatalf("repair --now of an emptied node without --adopt: %v, want a refusal that names --adopt", err)
	}
	out.Reset()
	if err := run(ctx, []string{"repair", "--nodes", nodes, "--node", "2", "--now", "--adopt"}, &out); err != nil ||
		!strings.Contains(out.String(), "node 2 repaired") {
		t.Fatalf("repair --now: %v, said %q", err, out.String())
	}
	rep, code = doctor(t, urls, "--node-timeout", "2s")
	if code != 0 {
		t.Fatalf("after repair --now: exit %d, %+v", code, rep.Findings)
	}

	for _, args := range [][]string{{"--node", "1", "--now", "--wait"}, {}} {
		if err := run(ctx, append([]string{"repair", "--nodes", nodes}, args...), &out); exitCode(err) != 2 {
			t.Errorf("repair %v: %v, want exit 2", args, err)
		}
	}
}

// A majority lost its data: exec exits 69, provision refuses and points to
// --reprovision-above, which needs an explicit T; after it, every token
// exceeds T.
func TestProvisionReprovisionsAboveTheGivenToken(t *testing.T) {
	g, urls := startNodes(t)
	ctx := context.Background()
	cl := g.NewClients()
	defer node.CloseClients(cl)
	c, err := redlock.New(cl, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var last uint64
	for range 5 {
		l, err := c.TryLock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		last = l.Token()
		l.Unlock(ctx)
	}
	for _, i := range []int{0, 1} {
		if err := g[i].Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if err := g[i].WipeData(); err != nil {
			t.Fatal(err)
		}
		if err := g[i].Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(ctx, []string{"exec", "--nodes", urls, "a", "--", "true"}, nil); exitCode(err) != 69 {
		t.Errorf("exec with a majority lost: exit %d (%v), want 69", exitCode(err), err)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"provision", "--nodes", urls}, &out); err == nil || !strings.Contains(err.Error(), "--reprovision-above") {
		t.Errorf("provision with a majority lost: %v", err)
	}
	for _, bad := range [][]string{{"--reprovision-above"}, {"--reprovision-above", "x"}} {
		if err := run(ctx, append([]string{"provision", "--nodes", urls}, bad...), &out); exitCode(err) != 2 {
			t.Errorf("provision %v: %v, want exit 2", bad, err)
		}
	}
	above := strconv.FormatUint(last+1000, 10)
	out.Reset()
	// The nodes recorded c's TTL of 1 s: reprovision waits that long after the loss.
	if err := run(ctx, []string{"provision", "--nodes", urls, "--reprovision-above", above, "--timeout", "200ms",
		"--longest-ttl", "500ms"}, &out); err != nil {
		t.Fatalf("reprovision: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "every later token exceeds "+above) {
		t.Errorf("reprovision said %q", out.String())
	}
	err = run(ctx, []string{"exec", "--nodes", urls, "a", "--", "sh", "-c", `test "$REDLOCK_TOKEN" -gt "$0"`, above}, nil)
	if err != nil {
		t.Errorf("a token after reprovisioning above %s: %v", above, err)
	}
}
