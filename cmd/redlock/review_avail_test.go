package main

import (
	"context"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/node"
)

// Review of issue 23, 2: cluster-mode nodes given as plain nodes answer
// the fenced scripts CROSSSLOT, which the library now reports as
// ErrFencingNode, final (a configuration error). exec still told the
// operator "the nodes are unavailable (no host can take the lock)", the
// outage diagnosis, sending them to look for down nodes. Real cluster-mode
// redis-servers, every slot served.
func TestReviewExecOnClusterNodesSaysSo(t *testing.T) {
	g, err := node.StartProcesses(context.Background(), 3, node.Config{
		Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	urls := make([]string, len(g))
	for i, n := range g {
		c := n.NewClient()
		err := c.Do(context.Background(), "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err()
		c.Close()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		urls[i] = "redis://" + n.Addr()
	}
	err = run(context.Background(), []string{"exec", "--nodes", strings.Join(urls, ","), "--ttl", "1s",
		"--wait", "0", "job", "--", "true"}, nil)
	t.Logf("exec: %v", err)
	if code := exitCode(err); code != 69 || strings.Contains(err.Error(), "unavailable") ||
		!strings.Contains(err.Error(), "Cluster") {
		t.Fatalf("exec on cluster-mode nodes: exit %d (%v), want 69 saying they are Redis Cluster nodes", code, err)
	}
}
