package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodeFacts is what doctor learned about one node.
type nodeFacts struct {
	Index          int               `json:"index"`
	Addr           string            `json:"addr"`
	Reachable      bool              `json:"reachable"`
	Error          string            `json:"error,omitempty"`
	Server         string            `json:"server,omitempty"` // redis or valkey
	Version        string            `json:"version,omitempty"`
	RunID          string            `json:"run_id,omitempty"`
	Role           string            `json:"role,omitempty"`
	MasterAddr     string            `json:"master,omitempty"`   // for a replica
	Replicas       []string          `json:"replicas,omitempty"` // for a master
	ClusterEnabled bool              `json:"cluster_enabled"`
	Config         map[string]string `json:"config,omitempty"` // appendonly, appendfsync, maxmemory, maxmemory-policy
	RTTMedian      time.Duration     `json:"rtt_median_ns"`
	RTTMax         time.Duration     `json:"rtt_max_ns"`
	ClockOffset    time.Duration     `json:"clock_offset_ns"`   // node's TIME minus this host's, at the round trip's midpoint
	NodeID         *int              `json:"node_id,omitempty"` // the library's: -1 when not intact
	ReplID         string            `json:"replid,omitempty"`  // the replication id it serves under
	NodeTime       time.Time         `json:"node_time"`
	Memory         memoryFacts       `json:"memory"`
	Fencing        *fencingFacts     `json:"fencing_state,omitempty"`
}

func addrOf(c redis.UniversalClient) string {
	if rc, ok := c.(*redis.Client); ok {
		return rc.Options().Addr
	}
	return fmt.Sprintf("%T", c)
}

func inspectNode(ctx context.Context, i int, c redis.UniversalClient) nodeFacts {
	f := nodeFacts{Index: i, Addr: addrOf(c), Config: map[string]string{}}
	// Round trips first, while nothing else is queued on the connection.
	var rtts []time.Duration
	for range pingsPerNode {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			f.Error = err.Error()
			return f
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	f.Reachable, f.RTTMedian, f.RTTMax = true, rtts[len(rtts)/2], rtts[len(rtts)-1]

	sent := time.Now()
	if t, err := c.Time(ctx).Result(); err == nil {
		rtt := time.Since(sent)
		f.ClockOffset = t.Sub(sent.Add(rtt / 2))
		f.NodeTime = t
	}

	info, err := c.Info(ctx, "server", "replication", "cluster", "memory").Result()
	if err != nil {
		f.Error = "INFO: " + err.Error()
		return f
	}
	kv := parseInfo(info)
	f.Server, f.Version = serverVersion(kv)
	f.RunID, f.Role = kv["run_id"], kv["role"]
	f.ReplID = kv["master_replid"]
	num := func(k string) int64 { n, _ := strconv.ParseInt(kv[k], 10, 64); return n }
	f.Memory = memoryFacts{Used: num("used_memory"), NotCounted: num("mem_not_counted_for_evict"),
		Max: num("maxmemory"), Policy: kv["maxmemory_policy"]}
	f.ClusterEnabled = kv["cluster_enabled"] == "1"
	if f.Role == "slave" {
		f.Role = "replica"
		f.MasterAddr = net.JoinHostPort(kv["master_host"], kv["master_port"])
	}
	n, _ := strconv.Atoi(kv["connected_slaves"])
	for r := range n {
		// slave0:ip=127.0.0.1,port=6380,state=online,...
		fields := map[string]string{}
		for _, p := range strings.Split(kv["slave"+strconv.Itoa(r)], ",") {
			if k, v, ok := strings.Cut(p, "="); ok {
				fields[k] = v
			}
		}
		f.Replicas = append(f.Replicas, net.JoinHostPort(fields["ip"], fields["port"]))
	}
	for _, key := range []string{"appendonly", "appendfsync", "maxmemory", "maxmemory-policy"} {
		// CONFIG may be renamed away or denied by an ACL: then the setting
		// stays unknown, which the judge reports.
		if res, err := c.ConfigGet(ctx, key).Result(); err == nil {
			if v, ok := res[key]; ok {
				f.Config[key] = v
			}
		}
	}
	return f
}

// serverVersion tells Valkey from Redis: every Valkey reports
// redis_version 7.2.4, for compatibility, and its own in valkey_version.
func serverVersion(info map[string]string) (server, version string) {
	if v := info["valkey_version"]; v != "" {
		return "valkey", v
	}
	return "redis", info["redis_version"]
}

func parseInfo(s string) map[string]string {
	kv := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			kv[k] = v
		}
	}
	return kv
}
