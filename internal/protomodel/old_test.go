package protomodel

import "testing"

// Today's repair (Old, the code at 5e7ef93) on the two faults of the issue
// that the model reaches. Breadth first, so each trace is a shortest one
// within its bounds.

// item1Old: a node emptied while running (FLUSHALL: no restart, so its
// uptime is long) is repaired at once. Two clients, one attempt each, one
// wipe of any node, one repairer of any node, TTL 1 tick and no tick at
// all: the whole story happens at t=0.
var item1Old = Config{Clients: 2, Attempts: 1, Repairers: 1, Wipes: 1, WipeNoRestart: true, TTL: 1, MaxTime: 0}

// item3Old: an online repair paused between its reads and its writes
// re-admits a node that meanwhile was repaired by another client, used, and
// wiped again. Wipes here restart the node, so the uptime rule holds them
// back a full TTL and item 1 cannot happen: only the stale repairer can
// re-admit the node early. Two clients, one attempt each; two repairers and
// two wipes, of node 1; TTL 1 tick, t in 0..1; clients and repairs begin
// at t=1, after the first wipe's delay (restrictions that keep the
// breadth-first search small, not conditions of the bug).
var item3Old = Config{Clients: 2, Attempts: 1, Repairers: 2, Wipes: 2, WipeRestart: true,
	WipeNodes: n1, RepairNodes: n1, TTL: 1, MaxTime: 1, ClientsFrom: 1, RepairsFrom: 1}

func TestOldItem1EmptiedNodeIsRepairedAtOnce(t *testing.T) {
	res := search(t, "item 1", item1Old, Old)
	if res.Violation == nil || res.Violation.Prop != PropLease {
		t.Fatalf("want a lease violation (two holders within validity), got %v", res.Violation)
	}
	logTrace(t, "item 1, shortest: "+res.Violation.String(), res.Trace)
}

// The same bounds with wipes that restart the node: the uptime rule makes
// the repair wait, and no tick passes, so the node is never repaired and
// nothing can go wrong. What item 1 needs is precisely the wipe without
// a restart.
func TestOldItem1NeedsAWipeWithoutRestart(t *testing.T) {
	skipUnderRace(t)
	cfg := item1Old
	cfg.WipeNoRestart, cfg.WipeRestart = false, true
	if res := search(t, "item 1, wipes with a restart", cfg, Old); res.Violation != nil {
		logTrace(t, res.Violation.String(), res.Trace)
		t.Fatal("want no violation")
	}
}

func TestOldItem3StaleRepairReadmitsANodeLostAgain(t *testing.T) {
	skipUnderRace(t)
	res := search(t, "item 3", item3Old, Old)
	if res.Violation == nil || res.Violation.Prop != PropLease {
		t.Fatalf("want a lease violation, got %v", res.Violation)
	}
	logTrace(t, "item 3, shortest: "+res.Violation.String(), res.Trace)

	// The tokens: the stale repairer sets the node's counter below the
	// tokens committed since its read. Checking M1 alone, the same bounds
	// reach an acquisition whose token is not above one returned before
	// it began (checking U alone, they reach a token returned twice: the
	// deep run shows it). Depth first, then made 1-minimal.
	cfg := item3Old
	cfg.Props, cfg.DFS = CheckM1, true
	res = search(t, "item 3, M1 only", cfg, Old)
	if res.Violation == nil || res.Violation.Prop != PropM1 {
		t.Fatalf("want a violation of M1, got %v", res.Violation)
	}
	logTrace(t, "item 3, M1, minimized", minimized(t, cfg, Old, res))
}
