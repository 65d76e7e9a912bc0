package protomodel

import (
	"strings"
	"testing"
)

// A restart from an older snapshot of the data (Redis reloads its last RDB
// or AOF after a crash: the writes since are lost) brings back the stamp
// that the snapshot holds, time, nonce and all, under a new run. Repair
// writes that compared the stamp only let a repairer that read that stamp
// before the snapshot write its stale counter after the restart: item 3,
// with the wipe replaced by a rollback (a U violation: 513 twice). The
// scripts must run the identity prelude (which stamps the node anew when
// its stamp names another run) before they compare, or compare the stamp's
// run with the node's, as swap_uuid.lua and repair.lua now do (New).

// rollbackCfg is rollbackGround (new_test.go): one client, two attempts;
// two repairers, one wipe, one snapshot and one restart from it, all of
// node 1; TTL 1 tick, t in 0..1.
var rollbackCfg = rollbackGround

// rollbackTrace is the counterexample, written out: it replays in the
// full semantics; the deep run's search finds one like it, and finds
// nothing with the prelude (82.8 million states), too slow for every run.
var rollbackTrace = []Event{
	{EvWipe, 1, 0},                                                              // n1 emptied (FLUSHALL)
	{EvRepStart, 0, 1}, {EvRepRead, 0, 1}, {EvRepRead, 0, 0}, {EvRepRead, 0, 2}, // r0 sees the stamp: too soon
	{EvRepStart, 1, 1}, {EvRepRead, 1, 1}, {EvRepRead, 1, 0}, {EvRepRead, 1, 2}, // r1 too
	{EvSave, 1, 0}, // the snapshot holds the stamp
	{EvTick, 0, 0},
	{EvRepRead, 0, 0}, {EvRepRead, 0, 1}, {EvRepRead, 0, 2}, // r0 decides: G=1
	{EvRepRead, 1, 0}, {EvRepRead, 1, 1}, {EvRepRead, 1, 2}, // r1 decides: G=1
	{EvRepSwap, 1, 0}, {EvRepWrite, 1, 0}, // r1 repairs n1
	{EvStart, 0, 0}, {EvAcqExec, 0, 1}, {EvAcqExec, 0, 2}, {EvDecide1, 0, 0b110},
	{EvComExec, 0, 1}, {EvComExec, 0, 2}, {EvDecide2, 0, 0b110}, // c0 holds 513, minted and committed on n1
	{EvRollback, 1, 0},                    // n1 restarts from the snapshot: the stamp is back
	{EvRepSwap, 0, 0}, {EvRepWrite, 0, 0}, // r0's stale repair passes
	{EvUnlock, 0, 0}, {EvRelExec, 0, 2},
	{EvStart, 0, 0}, {EvAcqExec, 0, 0}, {EvAcqExec, 0, 1}, {EvDecide1, 0, 0b011},
	{EvComExec, 0, 0}, {EvComExec, 0, 1}, {EvDecide2, 0, 0b011}, // 513 again
}

func TestRollbackDoesNotDefeatTheStampCheck(t *testing.T) {
	// The stale repairer's swap is refused, by the run check (New) or by
	// the prelude, so the trace stops being a behaviour there.
	swap := 27 // rollbackTrace[27] is r0's swap after the restart
	for _, rules := range []Rules{New, NewPrelude} {
		if v, _ := run(rollbackCfg, rules, rollbackTrace); v != nil {
			t.Fatalf("%s: %v", rules.Name, v)
		}
		lines := Replay(rollbackCfg, rules, rollbackTrace[:swap+1])
		if last := lines[len(lines)-1]; !strings.Contains(last, "holds -1") {
			t.Fatalf("%s: want the stale swap refused, got %q", rules.Name, last)
		}
		logTrace(t, rules.Name+", up to the stale swap", lines[swap-1:])
	}
}
