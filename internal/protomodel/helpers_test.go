package protomodel

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

const n1 = 1 << 1 // node 1 only, in WipeNodes and RepairNodes

// skipUnderRace skips a search under the race detector: it slows a search
// twenty times and has nothing to find in it (one goroutine). Item 1's
// search still runs there, as a smoke test.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceOn {
		t.Skip("a search: too slow under the race detector, which has nothing to find in it")
	}
}

// search runs Explore and logs what it searched.
func search(t *testing.T, name string, cfg Config, rules Rules) *Result {
	t.Helper()
	res, err := Explore(cfg, rules)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	how := "breadth first"
	if cfg.DFS {
		how = "depth first"
	}
	t.Logf("%s, rules %s, %s: %d states, %d transitions, depth %d, complete %v, %v",
		name, rules.Name, how, res.States, res.Transitions, res.Depth, res.Complete, res.Elapsed.Round(1e6))
	return res
}

// logTrace logs a violation's trace, a line per event.
func logTrace(t *testing.T, title string, lines []string) {
	t.Helper()
	t.Logf("%s (%d events):\n  %s", title, countEvents(lines), strings.Join(lines, "\n  "))
}

// countEvents counts the events of a trace (Replay: a line each).
func countEvents(lines []string) int {
	n := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "VIOLATION") {
			n++
		}
	}
	return n
}

// minimized replays a depth-first violation made as short as Minimize can.
func minimized(t *testing.T, cfg Config, rules Rules, res *Result) []string {
	t.Helper()
	evs, err := Minimize(cfg, rules, res.Events)
	if err != nil {
		t.Fatal(err)
	}
	return Replay(cfg, rules, evs)
}

// envConfig reads a Config from PROTOMODEL_* variables, for runs by hand
// (TestAdHoc).
func envConfig() (Config, Rules, bool) {
	get := func(k string, d int) int {
		if v, err := strconv.Atoi(os.Getenv("PROTOMODEL_" + k)); err == nil {
			return v
		}
		return d
	}
	rules, ok := allRules[os.Getenv("PROTOMODEL_RULES")]
	cfg := Config{
		Clients: get("CLIENTS", 2), Attempts: get("ATTEMPTS", 1), Repairers: get("REPAIRERS", 1),
		Wipes: get("WIPES", 1), WipeNoRestart: get("WIPE_NO_RESTART", 1) == 1, WipeRestart: get("WIPE_RESTART", 1) == 1,
		WipeNodes: uint8(get("WIPE_NODES", 0)), RepairNodes: uint8(get("REPAIR_NODES", 0)),
		TTL: get("TTL", 1), MaxTime: get("MAX_TIME", 1), MaxDepth: get("MAX_DEPTH", 0),
		ClientsFrom: get("CLIENTS_FROM", 0), RepairsFrom: get("REPAIRS_FROM", 0),
		Timeouts: get("TIMEOUTS", 0) == 1, Unlock: get("UNLOCK", 0) == 1, NoValidityCheck: get("NO_VALIDITY_CHECK", 0) == 1,
		Rollbacks: get("ROLLBACKS", 0), Saves: get("SAVES", 0),
		ClockJump: get("CLOCK_JUMP", 0), Jumps: get("JUMPS", 0), Props: PropSet(get("PROPS", 0)),
		MaxStates: get("MAX_STATES", 0), DFS: get("DFS", 1) == 1, NoReduction: get("NO_REDUCTION", 0) == 1,
		Extends: get("EXTENDS", 0), ShortTTL: get("SHORT_TTL", 0), Reprovisions: get("REPROVISIONS", 0), ExtTimeouts: get("EXT_TIMEOUTS", 0) == 1,
		Leaders: get("LEADERS", 0), SnapNodes: uint8(get("SNAP_NODES", 0)), OthersFrom: get("OTHERS_FROM", 0),
	}
	return cfg, rules, ok
}

// allRules are the rules TestAdHoc knows, by name.
var allRules = func() map[string]Rules {
	m := map[string]Rules{}
	for _, r := range []Rules{Old, New, NewPrelude, NewWritesNotStamped, NewNoDelay, NewStaleReads,
		NewPullOnFailure, NewUnheardAtEnd, NewNoUnheard, NewProvAtOnce, NewProvNoDelay, NewProvUnconditional, NewProvAnyRun} {
		m[r.Name] = r
	}
	return m
}()

// TestAdHoc searches the space PROTOMODEL_RULES and the other PROTOMODEL_*
// variables describe (envConfig), for runs by hand.
func TestAdHoc(t *testing.T) {
	cfg, rules, ok := envConfig()
	if !ok {
		t.Skip("set PROTOMODEL_RULES (old, new, new+prelude, new-writes-not-stamped, new-no-delay, new-stale-reads, " +
			"new+pull-at-start, new+extend-fixed, new+extend-fixed-no-unheard, new-prov-at-once, new-prov-no-delay, new-prov-unconditional, new+prov-same-run)")
	}
	t.Logf("%+v", cfg)
	res := search(t, "ad hoc", cfg, rules)
	if res.Violation != nil {
		logTrace(t, "violation: "+res.Violation.String(), res.Trace)
		if cfg.DFS {
			logTrace(t, "minimized", minimized(t, cfg, rules, res))
		}
	}
}

// wantTraceBreaksOnlyWithout replays trace in cfg: under broken it must
// end in a lease violation, logged under title; under New, in none.
func wantTraceBreaksOnlyWithout(t *testing.T, cfg Config, broken Rules, trace []Event, title string) {
	t.Helper()
	v, n := run(cfg, broken, trace)
	if v == nil || v.Prop != PropLease {
		t.Fatalf("%s: want the trace to replay to a lease violation, got %v", broken.Name, v)
	}
	logTrace(t, title, Replay(cfg, broken, trace[:n]))
	if v, _ := run(cfg, New, trace); v != nil {
		t.Fatalf("New: %v", v)
	}
}
