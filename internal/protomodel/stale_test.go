package protomodel

import "testing"

// Why New takes the counters from a round of reads that began once the
// delay had passed (FreshReads): without it, a repair may use a counter
// read before a commit that a lease still valid then completed. The
// exhaustive bounds do not reach this (it needs four attempts: two that
// raise node 1's counter alone, then the one whose commit the stale read
// misses, then the one whose token repeats), so here it is written out.

var staleCfg = Config{Clients: 1, Attempts: 4, Timeouts: true, Repairers: 1, Wipes: 1, WipeNoRestart: true,
	WipeNodes: n1, RepairNodes: n1, TTL: 1, MaxTime: 1}

var staleTrace = []Event{
	{EvStart, 0, 0}, {EvAcqExec, 0, 1}, {EvGiveUp, 0, 0}, {EvRelExec, 0, 1}, // n1's G=1
	{EvStart, 0, 0}, {EvAcqExec, 0, 1}, {EvGiveUp, 0, 0}, {EvRelExec, 0, 1}, // n1's G=2
	{EvStart, 0, 0}, {EvAcqExec, 0, 0}, {EvAcqExec, 0, 1}, {EvDecide1, 0, 0b011}, // token 769
	{EvComExec, 0, 1},                                                           // committed on n1
	{EvWipe, 1, 0},                                                              // n1 emptied
	{EvRepStart, 0, 1}, {EvRepRead, 0, 1}, {EvRepRead, 0, 0}, {EvRepRead, 0, 2}, // stamp seen at t=0: too soon
	{EvRepRead, 0, 2},                        // the next round reads n2's G=0 ...
	{EvComExec, 0, 2}, {EvDecide2, 0, 0b110}, // ... before the commit there: 769 returned, valid until t=1
	{EvTick, 0, 0},
	{EvRepRead, 0, 1}, {EvRepRead, 0, 0}, // the delay has passed: repair n1 with G=2
	{EvRepSwap, 0, 0}, {EvRepWrite, 0, 0},
	{EvStart, 0, 0}, {EvAcqExec, 0, 0}, {EvAcqExec, 0, 1}, {EvDecide1, 0, 0b011},
	{EvComExec, 0, 0}, {EvComExec, 0, 1}, {EvDecide2, 0, 0b011}, // 769 again
}

func TestStaleCountersNeedFreshReads(t *testing.T) {
	v, n := run(staleCfg, NewStaleReads, staleTrace)
	if v == nil || v.Prop != PropU {
		t.Fatalf("New with stale reads: want the trace to replay to a U violation, got %v", v)
	}
	logTrace(t, "New, counters read before the delay passed", Replay(staleCfg, NewStaleReads, staleTrace[:n]))
	if v, _ := run(staleCfg, New, staleTrace); v != nil {
		t.Fatalf("New: %v", v)
	}
}

// The same story under New, with a client that does not check its
// validity after round 2 (its monotonic clock stalled): the round of reads
// begins after the delay, but the commit it misses still completes an
// acquisition that was due to fail. U and M1 for the tokens a repaired node
// mints rest on the clients' validity check, that is on their clocks, as
// the lease does (docs/fencing.md says they rest on no timing).
func TestRepairedTokensNeedTheValidityCheck(t *testing.T) {
	cfg := staleCfg
	cfg.NoValidityCheck, cfg.Unlock, cfg.Props = true, true, CheckU|CheckM1
	trace := []Event{
		{EvStart, 0, 0}, {EvAcqExec, 0, 1}, {EvGiveUp, 0, 0}, {EvRelExec, 0, 1},
		{EvStart, 0, 0}, {EvAcqExec, 0, 1}, {EvGiveUp, 0, 0}, {EvRelExec, 0, 1},
		{EvStart, 0, 0}, {EvAcqExec, 0, 0}, {EvAcqExec, 0, 1}, {EvDecide1, 0, 0b011},
		{EvComExec, 0, 1},
		{EvWipe, 1, 0},
		{EvRepStart, 0, 1}, {EvRepRead, 0, 1}, {EvRepRead, 0, 0}, {EvRepRead, 0, 2}, // stamp seen at t=0
		{EvTick, 0, 0},
		{EvRepRead, 0, 2},                        // a round that begins once the delay passed ...
		{EvComExec, 0, 2}, {EvDecide2, 0, 0b110}, // ... misses a commit that should have been too late
		{EvRepRead, 0, 1}, {EvRepRead, 0, 0},
		{EvRepSwap, 0, 0}, {EvRepWrite, 0, 0},
		{EvUnlock, 0, 0}, // (it would hold for ever: its clock stalled)
		{EvStart, 0, 0}, {EvAcqExec, 0, 0}, {EvAcqExec, 0, 1}, {EvDecide1, 0, 0b011},
		{EvComExec, 0, 0}, {EvComExec, 0, 1}, {EvDecide2, 0, 0b011},
	}
	v, n := run(cfg, New, trace)
	if v == nil || v.Prop != PropU {
		t.Fatalf("New, no validity check: want a U violation, got %v", v)
	}
	logTrace(t, "New, a client that skips its validity check", Replay(cfg, New, trace[:n]))
	cfg.NoValidityCheck = false
	if v, _ := run(cfg, New, trace); v != nil {
		t.Fatalf("New with the validity check: %v", v)
	}
}
