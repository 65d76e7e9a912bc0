package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// A node that reached maxmemory with noeviction refuses every write, so it
// grants no lock: doctor used to pass it (issue 12 and 14: it showed up only
// as "amnesiac" in lock errors). It is a failure, "full", and a node above
// 80% of maxmemory is a warning.
func TestDoctorReportsAFullNode(t *testing.T) {
	ctx := context.Background()
	g, urls := startAOFNodes(t, 2)
	full, err := node.StartProcess(ctx, node.Config{Name: "full", Persistence: node.PersistAOFAlways,
		Args: []string{"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { full.Close() })
	urls = append(urls, "redis://"+full.Addr())
	if err := run(ctx, []string{"provision", "--nodes", strings.Join(urls, ",")}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}

	fc := full.NewClient()
	defer fc.Close()
	value := strings.Repeat("x", 1024)
	filled := false
	for i := range 10000 {
		if err := fc.Set(ctx, fmt.Sprintf("filler:%d", i), value, 0).Err(); err != nil {
			if !strings.HasPrefix(err.Error(), "OOM") {
				t.Fatal(err)
			}
			filled = true
			break
		}
	}
	if !filled {
		t.Fatal("the node never refused a write")
	}
	// Node 0 at about 90% of its maxmemory.
	c0 := g[0].NewClient()
	defer c0.Close()
	used := usedMemory(t, c0)
	if err := c0.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used*10/9, 10)).Err(); err != nil {
		t.Fatal(err)
	}

	rep, code := doctor(t, urls, "--node-timeout", "2s")
	if f := find(t, rep, 2, "memory"); code != 1 || f.Status != statusFail || !strings.Contains(f.Detail, "full") {
		t.Errorf("exit %d; the full node: %+v", code, f)
	}
	if f := find(t, rep, 0, "memory"); f.Status != statusWarn {
		t.Errorf("node 0 at 90%%: %+v", f)
	}
	if f := find(t, rep, 1, "memory"); f.Status != statusOK {
		t.Errorf("node 1: %+v", f)
	}
	if f := find(t, rep, 2, "node id"); f.Status != statusOK {
		t.Errorf("the full node is not amnesiac: %+v", f)
	}
}

func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	kv := parseInfo(info)
	n, _ := strconv.ParseInt(kv["used_memory"], 10, 64)
	return n - func() int64 { m, _ := strconv.ParseInt(kv["mem_not_counted_for_evict"], 10, 64); return m }()
}

// Valkey reports redis_version 7.2.4 whatever its version; doctor reads
// valkey_version. (INFO server lines as Valkey 8.0.1 prints them; the rest
// of doctor runs against real servers.)
func TestDoctorReadsTheValkeyVersion(t *testing.T) {
	valkey := parseInfo("# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\nredis_mode:standalone\r\n")
	if s, v := serverVersion(valkey); s != "valkey" || v != "8.0.1" {
		t.Errorf("valkey: %s %s", s, v)
	}
	if s, v := serverVersion(parseInfo("# Server\r\nredis_version:7.0.15\r\n")); s != "redis" || v != "7.0.15" {
		t.Errorf("redis: %s %s", s, v)
	}
}
