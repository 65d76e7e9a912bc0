package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Thresholds. A clock offset between nodes does not by itself break a
// lease (TTLs are relative), but clocks that far apart are not being
// disciplined, and an undisciplined clock is one that gets stepped.
const (
	pingsPerNode  = 5
	skewWarn      = time.Second
	rttWarnFactor = 2 // warn when the slowest ping exceeds node timeout / 2
)

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
