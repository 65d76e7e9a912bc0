package protomodel

import "testing"

// Issue 32's second rule: Reprovision waits out the restart delay of every
// node that is not intact (ProvDelay), and resets each node only if it
// still holds what was read (ProvConditional). Without the delay the
// search finds the break; with it, nothing in provGround (the
// deep run searches wider). Traces written out show the conditional
// resets matter (a node wiped between the read and the reset), and that
// they are not enough as reset.lua has them: a node restarted from an
// older copy of its data between the read and the reset still holds the
// uuid, id and stamp read, and is re-admitted without the lock keys it
// lost (ProvSameRun closes it).

// provAtOnce: the ground. c0 and c1, one attempt each; one wipe,
// of n1; one reprovision; TTL 1 tick and no tick at all.
var provAtOnce = Config{Clients: 2, Attempts: 1, Wipes: 1, WipeNoRestart: true, WipeNodes: n1, Reprovisions: 1,
	TTL: 1, MaxTime: 0}

// provGround: the same with t in 0..1, c1 trying the lock from t=1 (a
// restriction that keeps it fast: without it, deepCases). Depth first:
// 3,466,926 states, 7.4 s on one core.
var provGround = Config{Clients: 2, Attempts: 1, Leaders: 1, OthersFrom: 1, Wipes: 1, WipeNoRestart: true,
	WipeNodes: n1, Reprovisions: 1, TTL: 1, MaxTime: 1, DFS: true}

func TestResetScript(t *testing.T) {
	n := provisioned(1, -10)
	n.G, n.E = 7, 1
	n.Acquire(0, 3, 2)
	read := ResetCond{UUID: 1, ID: 1, Run: -1}
	if r := n.Reset(5, 4, &read); r != ResetDone || n.ID != 4 || n.UUID != 4 || n.G != 8 || n.E != 5 ||
		!n.Intact() || n.Holder != 3 || n.Expiry != 2 {
		t.Fatalf("intact node as read: new identity, G and E raised, the lock key kept: %d, node %+v", r, n)
	}
	if r := n.Reset(9, 4, &read); r != ResetChanged || n.G != 8 {
		t.Fatalf("a node whose id changed since the read: untouched: %d, node %+v", r, n)
	}
	m := provisioned(0, -10)
	m.Wipe(0, false)
	st := m.ReadState(0)
	lost := ResetCond{UUID: -1, ID: -1, Stamp: st.Stamp, Run: -1}
	w := m
	w.Wipe(1, false)
	if r := w.Reset(3, 3, &lost); r != ResetChanged || w.Intact() {
		t.Fatalf("wiped again since the read (the stamp went with it): untouched: %d, node %+v", r, w)
	}
	if r := w.Reset(3, 3, nil); r != ResetDone || !w.Intact() || w.Stamp.Set {
		t.Fatalf("unconditional (before issue 32): reset whatever it holds: %d, node %+v", r, w)
	}
	if r := m.Reset(3, 3, &lost); r != ResetDone || !m.Intact() || m.Stamp.Set || m.G != 3 || m.E != 3 {
		t.Fatalf("lost node as read: %d, node %+v", r, m)
	}
	m.Save()
	m.Rollback(4) // the same keys, another run: not intact
	same := ResetCond{UUID: 3, ID: 3, Run: -1}
	if r := m; r.Reset(9, 3, &same) != ResetDone {
		t.Fatalf("restarted from a copy of the data read: reset.lua's condition holds: node %+v", r)
	}
	same.Run = 0
	if r := m.Reset(9, 3, &same); r != ResetChanged || m.Intact() {
		t.Fatalf("the run compared: untouched: %d, node %+v", r, m)
	}
}

// The break: n1 loses its data while c0 holds the lock on n0 and
// n1, the reprovision resets n1 at once, c1 takes n1 and n2. Breadth
// first: a shortest trace.
func TestReprovisionWithoutTheDelayIsCaught(t *testing.T) {
	skipUnderRace(t)
	for _, rules := range []Rules{NewProvAtOnce, NewProvNoDelay} {
		res := search(t, "reprovision at once", provAtOnce, rules)
		if res.Violation == nil || res.Violation.Prop != PropLease {
			t.Fatalf("%s: want a lease violation, got %v", rules.Name, res.Violation)
		}
		logTrace(t, rules.Name+", shortest: "+res.Violation.String(), res.Trace)
	}
}

func TestReprovisionWaitsOut(t *testing.T) {
	skipUnderRace(t)
	res := search(t, "reprovision", provGround, New)
	if res.Violation != nil {
		logTrace(t, "VIOLATION: "+res.Violation.String(), minimized(t, provGround, New, res))
		t.Fatal("Reprovision with the delay violates a property")
	}
	if !res.Complete {
		t.Fatal("the search did not complete")
	}
}

// A majority lost: c0 holds on n0 and n1, both are wiped, the
// reprovision resets them at once, c1 takes them.
var provTwoCfg = Config{Clients: 2, Attempts: 1, Wipes: 2, WipeNoRestart: true, WipeNodes: 0b011, Reprovisions: 1,
	TTL: 1, MaxTime: 1}

var provTwoTrace = []Event{
	{EvStart, 0, 0}, {EvAcqExec, 0, 0}, {EvAcqExec, 0, 1}, {EvDecide1, 0, 0b011},
	{EvComExec, 0, 0}, {EvComExec, 0, 1}, {EvDecide2, 0, 0b011}, // c0 holds on n0, n1 until t=1
	{EvWipe, 0, 0}, {EvWipe, 1, 0},
	{EvProvStart, 0, 0}, {EvProvRead, 0, 0}, {EvProvRead, 0, 1}, {EvProvRead, 0, 2},
	{EvProvWrite, 0, 0}, {EvProvWrite, 0, 1}, {EvProvWrite, 0, 2},
	{EvStart, 1, 0}, {EvAcqExec, 1, 0}, {EvAcqExec, 1, 1}, {EvDecide1, 1, 0b011},
	{EvComExec, 1, 0}, {EvComExec, 1, 1}, {EvDecide2, 1, 0b011},
}

func TestReprovisionAfterAMajorityLost(t *testing.T) {
	// With the delay, the reprovision reads again: its resets are not
	// events of this trace.
	wantTraceBreaksOnlyWithout(t, provTwoCfg, NewProvAtOnce, provTwoTrace, "two nodes wiped, reprovisioned at once")
}

// The conditional resets: n0 is lost at t=0; at t=1 the reprovision reads
// n1 intact, n1 is wiped (it held c0's key), and the reset makes it
// intact again, empty: c1 takes n0 and n1 while c0 holds n2 and what
// was n1.
var provCondCfg = Config{Clients: 2, Attempts: 1, Wipes: 2, WipeNoRestart: true, WipeNodes: 0b011, Reprovisions: 1,
	TTL: 1, MaxTime: 1}

var provCondTrace = []Event{
	{EvWipe, 0, 0},
	{EvProvStart, 0, 0}, {EvProvRead, 0, 0}, {EvProvRead, 0, 1}, {EvProvRead, 0, 2}, // too soon
	{EvTick, 0, 0},
	{EvStart, 0, 0}, {EvAcqExec, 0, 1}, {EvAcqExec, 0, 2}, {EvDecide1, 0, 0b110},
	{EvComExec, 0, 1}, {EvComExec, 0, 2}, {EvDecide2, 0, 0b110}, // c0 holds on n1, n2 until t=2
	{EvProvRead, 0, 0}, {EvProvRead, 0, 1},
	{EvWipe, 1, 0},
	{EvProvRead, 0, 2}, // the delay has passed: it decides
	{EvProvWrite, 0, 0}, {EvProvWrite, 0, 1}, {EvProvWrite, 0, 2},
	{EvStart, 1, 0}, {EvAcqExec, 1, 0}, {EvAcqExec, 1, 1}, {EvDecide1, 1, 0b011},
	{EvComExec, 1, 0}, {EvComExec, 1, 1}, {EvDecide2, 1, 0b011},
}

func TestReprovisionResetsConditionally(t *testing.T) {
	// n1's reset is refused: c1's acquisition there finds it not intact,
	// and its round 1 is not decided on n0 and n1.
	wantTraceBreaksOnlyWithout(t, provCondCfg, NewProvUnconditional, provCondTrace, "a node wiped between the read and an unconditional reset")
}

// reset.lua compared the uuid, the id and the stamp (NewProvAnyRun): a
// node restarted from a snapshot taken before c0 locked it holds all three
// as read, but has lost c0's key and serves under another run (not
// intact). The reset re-admitted it at once. Found by the deep run's
// search; here written out. reset.lua now also compares the run
// (replication id) read (ProvSameRun, in New).
var provRollbackCfg = Config{Clients: 2, Attempts: 1, Wipes: 1, WipeNoRestart: true, Saves: 1, Rollbacks: 1,
	WipeNodes: 0b011, Reprovisions: 1, TTL: 1, MaxTime: 1}

var provRollbackTrace = []Event{
	{EvSave, 1, 0}, // n1's snapshot: intact, no lock key
	{EvWipe, 0, 0},
	{EvProvStart, 0, 0}, {EvProvRead, 0, 0}, {EvProvRead, 0, 1}, {EvProvRead, 0, 2}, // too soon
	{EvTick, 0, 0},
	{EvStart, 0, 0}, {EvAcqExec, 0, 1}, {EvAcqExec, 0, 2}, {EvDecide1, 0, 0b110},
	{EvComExec, 0, 1}, {EvComExec, 0, 2}, {EvDecide2, 0, 0b110}, // c0 holds on n1, n2 until t=2
	{EvProvRead, 0, 0}, {EvProvRead, 0, 1},
	{EvRollback, 1, 0}, // n1 restarts from its snapshot: c0's key is gone
	{EvProvRead, 0, 2},
	{EvProvWrite, 0, 0}, {EvProvWrite, 0, 1}, {EvProvWrite, 0, 2},
	{EvStart, 1, 0}, {EvAcqExec, 1, 0}, {EvAcqExec, 1, 1}, {EvDecide1, 1, 0b011},
	{EvComExec, 1, 0}, {EvComExec, 1, 1}, {EvDecide2, 1, 0b011},
}

func TestReprovisionAfterARestartFromASnapshot(t *testing.T) {
	wantTraceBreaksOnlyWithout(t, provRollbackCfg, NewProvAnyRun, provRollbackTrace, "reset.lua re-admits a node restarted from an older copy")
}

// provDeep are the deep run's searches of Reprovision (TestDeep).
var provDeep = []deepCase{
	// provGround with c1 free from t=0 (it contains provAtOnce):
	// 11,953,222 states, 36 s.
	{"reprovision, both clients from t=0", func() Config { c := provGround; c.Leaders = 0; return c }(), New, false},
	// Two wipes, of n0 and n1: 32,962,491 states, 1.8 min.
	{"reprovision, two wipes", provTwoGround, New, false},
	// The same with unconditional resets: found (Lease) after 7.3 million
	// states, 14 s (TestReprovisionResetsConditionally's trace).
	{"reprovision, two wipes", provTwoGround, NewProvUnconditional, true},
	// A wipe of n0, a snapshot of n1 and a restart from it: reset.lua's
	// condition without the run (NewProvAnyRun) re-admits n1, found
	// (Lease) after 4.1 million states, 7 s
	// (TestReprovisionAfterARestartFromASnapshot's trace). The same bounds
	// under New are beyond 100 million states: its fix is shown on that
	// trace only.
	{"reprovision, a restart from a snapshot", provRollbackGround, NewProvAnyRun, true},
}

// provTwoGround is provGround with two wipes, of n0 and n1.
var provTwoGround = func() Config { c := provGround; c.Wipes, c.WipeNodes = 2, 0b011; return c }()

// provRollbackGround is provGround with one wipe, of n0, and one
// snapshot and one restart from it, of n1.
var provRollbackGround = func() Config {
	c := provGround
	c.WipeNodes, c.SnapNodes, c.Saves, c.Rollbacks = 1, n1, 1, 1
	return c
}()
