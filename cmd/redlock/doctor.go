package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// A status is how one check came out. Only failures make doctor exit
// non-zero; warnings are things an operator should know and may accept.
type status string

const (
	statusOK   status = "ok"
	statusWarn status = "warn"
	statusFail status = "fail"
)

// finding is one check's result, for one node or for the deployment.
type finding struct {
	Node   *int   `json:"node,omitempty"` // index in --nodes; absent for the deployment
	Addr   string `json:"addr,omitempty"`
	Check  string `json:"check"`
	Status status `json:"status"`
	Detail string `json:"detail"`
}

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

type doctorReport struct {
	Nodes       []nodeFacts `json:"nodes"`
	Findings    []finding   `json:"findings"`
	Verdict     status      `json:"verdict"`
	Failures    int         `json:"failures"`
	Warnings    int         `json:"warnings"`
	Fencing     bool        `json:"fencing"`
	NodeTimeout string      `json:"node_timeout"`
}

// Thresholds. A clock offset between nodes does not by itself break a
// lease (TTLs are relative), but clocks that far apart are not being
// disciplined, and an undisciplined clock is one that gets stepped.
const (
	pingsPerNode  = 5
	skewWarn      = time.Second
	rttWarnFactor = 2 // warn when the slowest ping exceeds node timeout / 2
)

// runDoctor is the preflight check of a deployment:
//
//	redlock doctor --nodes redis://h1:6379,... [--node-timeout 50ms] [--fencing=true] [--scan-time 2s] [--json]
func runDoctor(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	nodeTimeout := fs.Duration("node-timeout", redlock.DefaultNodeTimeout, "the per-node timeout the clients use")
	fencing := fs.Bool("fencing", true, "the clients use fencing tokens (check persistence and node ids)")
	prefix := fs.String("key-prefix", "redlock", "the clients' key prefix (where the node-id markers live)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for each node")
	scanTime := fs.Duration("scan-time", 2*time.Second, "how long to count each node's fenced keys (SCAN); "+
		"past it the count is a lower bound")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	clients, err := dialNodes(*nodesFlag)
	if err != nil {
		return &exitError{2, err}
	}
	defer closeAll(clients)

	rep := diagnose(ctx, clients, doctorConfig{*nodeTimeout, *fencing, *prefix, *timeout, *scanTime})
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writeDoctor(out, rep)
	}
	if rep.Verdict == statusFail {
		return &exitError{1, fmt.Errorf("doctor: %d check(s) failed", rep.Failures)}
	}
	return nil
}

func closeAll(clients []redis.UniversalClient) {
	for _, c := range clients {
		c.Close()
	}
}

// doctorConfig is what the checks depend on: the clients' settings, and
// how long doctor may wait.
type doctorConfig struct {
	nodeTimeout time.Duration
	fencing     bool
	prefix      string
	timeout     time.Duration // per node
	scanTime    time.Duration // per node, counting fenced keys
}

// diagnose gathers facts from every node at once, then judges them.
func diagnose(ctx context.Context, clients []redis.UniversalClient, cfg doctorConfig) *doctorReport {
	facts := make([]nodeFacts, len(clients))
	var g errgroup.Group
	for i, c := range clients {
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(ctx, cfg.timeout+cfg.scanTime)
			defer cancel()
			facts[i] = inspectNode(cctx, i, c)
			if cfg.fencing && facts[i].Reachable && facts[i].Error == "" {
				facts[i].Fencing = readFencing(cctx, c, cfg.prefix, cfg.scanTime)
			}
			return nil
		})
	}
	_ = g.Wait()
	rep := &doctorReport{Nodes: facts, Fencing: cfg.fencing, NodeTimeout: cfg.nodeTimeout.String()}
	var idErr error
	if cfg.fencing {
		idErr = readNodeIDs(ctx, clients, facts, cfg.prefix, cfg.timeout)
	}
	judge(rep, cfg, idErr)
	// Each node's findings together, in node order, then the deployment's.
	slices.SortStableFunc(rep.Findings, func(a, b finding) int {
		switch {
		case a.Node == nil && b.Node == nil:
			return 0
		case a.Node == nil:
			return 1
		case b.Node == nil:
			return -1
		}
		return *a.Node - *b.Node
	})
	rep.Verdict = statusOK
	for _, f := range rep.Findings {
		switch f.Status {
		case statusFail:
			rep.Failures++
			rep.Verdict = statusFail
		case statusWarn:
			rep.Warnings++
			if rep.Verdict == statusOK {
				rep.Verdict = statusWarn
			}
		}
	}
	return rep
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

// judge turns the facts into findings.
func judge(rep *doctorReport, cfg doctorConfig, idErr error) {
	nodeTimeout, fencing := cfg.nodeTimeout, cfg.fencing
	add := func(node int, check string, s status, format string, args ...any) {
		f := finding{Check: check, Status: s, Detail: fmt.Sprintf(format, args...)}
		if node >= 0 {
			n := node
			f.Node, f.Addr = &n, rep.Nodes[node].Addr
		}
		rep.Findings = append(rep.Findings, f)
	}
	facts := rep.Nodes
	up := 0
	byRunID := map[string]int{}
	for i, f := range facts {
		if !f.Reachable {
			add(i, "reachable", statusFail, "unreachable: %s", f.Error)
			continue
		}
		up++
		add(i, "reachable", statusOK, "%s %s, run_id %.8s", f.Server, f.Version, f.RunID)

		// Independence.
		if j, dup := byRunID[f.RunID]; dup && f.RunID != "" {
			add(i, "independent", statusFail, "the same server as node %d (run_id %.8s): one server listed twice", j, f.RunID)
		} else {
			byRunID[f.RunID] = i
			switch {
			case f.Role == "replica":
				of := f.MasterAddr
				if j := indexOfAddr(facts, f.MasterAddr); j >= 0 {
					of = fmt.Sprintf("node %d (%s)", j, f.MasterAddr)
				}
				add(i, "independent", statusFail, "a replica of %s, not an independent master", of)
			case len(f.Replicas) > 0:
				add(i, "independent", statusWarn, "a master with replicas %s: a failover to a replica that missed "+
					"the last writes loses locks (replication is asynchronous)", strings.Join(f.Replicas, ", "))
			default:
				add(i, "independent", statusOK, "a master without replicas")
			}
		}

		// Version and cluster mode.
		if major, _ := strconv.Atoi(strings.SplitN(f.Version, ".", 2)[0]); f.Server == "redis" && major < 6 {
			add(i, "version", statusWarn, "redis %s: tested with 6.2 and later", f.Version)
		} else {
			add(i, "version", statusOK, "%s %s", f.Server, f.Version)
		}
		switch {
		case f.ClusterEnabled && fencing:
			add(i, "cluster mode", statusFail, "cluster mode is on: fencing needs keys in several slots on one node; "+
				"use standalone masters, or clients with fencing off")
		case f.ClusterEnabled:
			add(i, "cluster mode", statusWarn, "cluster mode is on: each lock lives in one slot, on one shard; "+
				"the N nodes must still be N independent deployments")
		default:
			add(i, "cluster mode", statusOK, "standalone")
		}

		judgePersistence(i, f, fencing, add)
		judgeMemory(i, f, add)
		if fencing {
			judgeFencedKeys(i, f, cfg.scanTime, add)
		}

		// Round trip against the node timeout.
		switch {
		case f.RTTMedian >= nodeTimeout:
			add(i, "round trip", statusFail, "median %v over %d pings is above the node timeout %v: "+
				"every call would time out", f.RTTMedian.Round(time.Microsecond), pingsPerNode, nodeTimeout)
		case f.RTTMax > nodeTimeout/rttWarnFactor:
			add(i, "round trip", statusWarn, "median %v, slowest %v of %d pings, against a node timeout of %v: "+
				"little headroom", f.RTTMedian.Round(time.Microsecond), f.RTTMax.Round(time.Microsecond), pingsPerNode, nodeTimeout)
		default:
			add(i, "round trip", statusOK, "median %v, slowest %v of %d pings (node timeout %v)",
				f.RTTMedian.Round(time.Microsecond), f.RTTMax.Round(time.Microsecond), pingsPerNode, nodeTimeout)
		}
	}

	// The deployment.
	n := len(facts)
	switch {
	case n == 1:
		add(-1, "node count", statusWarn, "1 node: no fault tolerance, and no protection against its data loss")
	case n%2 == 0:
		add(-1, "node count", statusWarn, "%d nodes: an even count survives no more failures (%d) than %d nodes; use an odd N",
			n, (n-1)/2, n-1)
	default:
		add(-1, "node count", statusOK, "%d nodes: a majority is %d, survives %d failures", n, n/2+1, (n-1)/2)
	}
	if up < n/2+1 {
		add(-1, "quorum", statusFail, "only %d of %d nodes reachable: no majority (%d), no lock can be taken", up, n, n/2+1)
	} else {
		add(-1, "quorum", statusOK, "%d of %d nodes reachable (majority %d)", up, n, n/2+1)
	}
	judgeClocks(facts, add)
	if fencing {
		judgeNodeIDs(facts, idErr, add)
	}
}

func indexOfAddr(facts []nodeFacts, addr string) int {
	host, port, _ := net.SplitHostPort(addr)
	for j, g := range facts {
		h, p, _ := net.SplitHostPort(g.Addr)
		if p == port && (h == host || loopback(h) && loopback(host)) {
			return j
		}
	}
	return -1
}

func loopback(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func judgePersistence(i int, f nodeFacts, fencing bool, add func(int, string, status, string, ...any)) {
	aof, fsync := f.Config["appendonly"], f.Config["appendfsync"]
	lossy := statusWarn // without fencing, the RedLock spec's answer to data loss is a delayed restart
	if fencing {
		lossy = statusFail // a restarted node without its counters is amnesiac until repaired
	}
	switch {
	case aof == "":
		add(i, "persistence", statusWarn, "CONFIG GET is not allowed: appendonly and appendfsync unknown; check them by hand")
	case aof != "yes":
		add(i, "persistence", lossy, "appendonly %s: a restart loses every lock and token counter on this node; "+
			"set appendonly yes and appendfsync always, or restart it only after the longest TTL", aof)
	case fsync == "always":
		add(i, "persistence", statusOK, "appendonly yes, appendfsync always")
	case fencing:
		// The node keeps its id marker through such a loss, so the amnesia
		// guard cannot see it, and token uniqueness can break (docs/fencing.md).
		add(i, "persistence", statusFail, "appendonly yes, appendfsync %s: a crash can lose the last token "+
			"increments without the node noticing; fencing needs appendfsync always", fsync)
	default:
		add(i, "persistence", statusWarn, "appendonly yes, appendfsync %s: a crash can lose the last writes "+
			"(about a second with everysec); use always, or keep a crashed node down for the longest TTL", fsync)
	}

	policy, maxmem := f.Config["maxmemory-policy"], f.Config["maxmemory"]
	switch {
	case policy == "":
		add(i, "eviction", statusWarn, "CONFIG GET is not allowed: maxmemory-policy unknown; it must be noeviction")
	case policy == "noeviction":
		add(i, "eviction", statusOK, "maxmemory-policy noeviction")
	case maxmem == "0":
		add(i, "eviction", statusWarn, "maxmemory-policy %s, no maxmemory set yet: once one is, Redis may evict "+
			"lock keys and token counters; set noeviction", policy)
	default:
		add(i, "eviction", statusFail, "maxmemory-policy %s with maxmemory %s: Redis may evict a held lock or a "+
			"token counter under memory pressure; set noeviction", policy, maxmem)
	}
}

func judgeClocks(facts []nodeFacts, add func(int, string, status, string, ...any)) {
	var offsets []time.Duration
	lo, hi := -1, -1
	for i, f := range facts {
		if !f.Reachable {
			continue
		}
		offsets = append(offsets, f.ClockOffset)
		if lo < 0 || f.ClockOffset < facts[lo].ClockOffset {
			lo = i
		}
		if hi < 0 || f.ClockOffset > facts[hi].ClockOffset {
			hi = i
		}
	}
	if len(offsets) < 2 {
		return
	}
	spread := facts[hi].ClockOffset - facts[lo].ClockOffset
	if spread > skewWarn {
		add(-1, "clock skew", statusWarn, "node clocks %v apart (node %d ahead of node %d): they are not kept in "+
			"sync, and a clock that is stepped back into sync ends leases early or late", spread.Round(time.Millisecond), hi, lo)
		return
	}
	add(-1, "clock skew", statusOK, "node clocks within %v of each other (TIME, corrected by half the round trip)",
		spread.Round(time.Microsecond))
}

func writeDoctor(out io.Writer, rep *doctorReport) {
	fenced := "on"
	if !rep.Fencing {
		fenced = "off"
	}
	fmt.Fprintf(out, "redlock doctor: %d nodes, fencing %s, node timeout %s\n\n", len(rep.Nodes), fenced, rep.NodeTimeout)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCHECK\tSTATUS\tDETAIL")
	for _, f := range rep.Findings {
		where := "deployment"
		if f.Node != nil {
			where = fmt.Sprintf("%d %s", *f.Node, f.Addr)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", where, f.Check, strings.ToUpper(string(f.Status)), f.Detail)
	}
	tw.Flush()
	fmt.Fprintf(out, "\nverdict: %s (%d failed, %d warnings)\n", strings.ToUpper(string(rep.Verdict)), rep.Failures, rep.Warnings)
}
