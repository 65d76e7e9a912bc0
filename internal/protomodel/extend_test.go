package protomodel

import (
	"strings"
	"testing"
)

// Issue 32's first rule: an Extend counts each granted node for no longer
// than the shortest TTL of the holder's extension calls unheard there
// (UnheardTTLs). Searched in extendGround: the rule removed, the search
// finds the issue's late shortening; with the library's rules (New),
// nothing. The rule as it first landed (NewPullOnFailure, 467e4dd) fails
// twice over, in the same bounds: a shortening cuts its nodes as soon as
// they run it, while the holder kept its old validity until the Extend
// returned (closed by PullAtStart); and a late call heard while a later
// extension runs was no longer counted, though it may have landed after
// that extension's call (closed by UnheardAtStart). Both are replayed on
// real nodes in the root package (extend_unheard_test.go).

// extendGround: c0 holds the lock (TTL 2 ticks) and extends twice, each
// time for 2 ticks or 1 (a shortening), and may stop waiting for an
// extension; c1 tries the lock from t=1; t in 0..1; every late call.
// Depth first: 4,900,040 states, 16 s on one core.
var extendGround = Config{Clients: 2, Attempts: 1, Leaders: 1, OthersFrom: 1, Extends: 2, TTL: 2, ShortTTL: 1,
	MaxTime: 1, ExtTimeouts: true, DFS: true}

func TestExtendScript(t *testing.T) {
	n := provisioned(1, -10)
	n.Acquire(0, 3, 2)
	if ok, id := n.Extend(1, 3, 1); !ok || id != 1 || n.Expiry != 2 {
		t.Fatalf("own value: extended to now+ttl, the id replied: %v %d, node %+v", ok, id, n)
	}
	if ok, _ := n.Extend(1, 3, 5); !ok || n.Expiry != 6 {
		t.Fatalf("a longer TTL: %v, node %+v", ok, n)
	}
	if ok, _ := n.Extend(1, 4, 9); ok || n.Expiry != 6 {
		t.Fatalf("another value: refused, nothing changed: %v, node %+v", ok, n)
	}
	if ok, _ := n.Extend(6, 3, 9); ok || n.Holder != 3 {
		t.Fatalf("an expired key is not re-created: %v, node %+v", ok, n)
	}
	n.Wipe(6, false)
	if ok, id := n.Extend(6, 3, 9); ok || id != -1 || n.Holder != 0 {
		t.Fatalf("emptied node: %v %d, node %+v", ok, id, n)
	}
}

func TestExtendLibraryRulesFindNothing(t *testing.T) {
	skipUnderRace(t)
	res := search(t, "extensions", extendGround, New)
	if res.Violation != nil {
		logTrace(t, "VIOLATION of the library's rules: "+res.Violation.String(), minimized(t, extendGround, New, res))
		t.Fatal("the library's rules violate a property")
	}
	if !res.Complete {
		t.Fatal("the search did not complete")
	}
}

// wantLeaseBreak searches extendGround under rules, wants a lease
// violation, logs it made 1-minimal, and returns its trace.
func wantLeaseBreak(t *testing.T, title string, cfg Config, rules Rules) []string {
	t.Helper()
	res := search(t, title, cfg, rules)
	if res.Violation == nil || res.Violation.Prop != PropLease {
		t.Fatalf("%s: want a lease violation, got %v", rules.Name, res.Violation)
	}
	lines := minimized(t, cfg, rules, res)
	logTrace(t, title+", minimized: "+res.Violation.String(), lines)
	return lines
}

// The rule removed: the issue's break. A shortening fails (or succeeds on
// some nodes) with a call still in flight; a later Extend with the long
// TTL succeeds and sets the validity a long TTL ahead; the short call
// lands late on a node of that majority and cuts it; c1 takes that node.
func TestExtendWithoutUnheardTTLsIsCaught(t *testing.T) {
	lines := wantLeaseBreak(t, "the late shortening", extendGround, NewNoUnheard)
	if !strings.Contains(strings.Join(lines, "\n"), "late: its round is over") {
		t.Fatal("want the break to come from a late extension call")
	}
}

// The issue's story, written out: c0 holds on n0 and n1 until t=2; it
// extends for 1 tick and gives up with every call in flight (the
// validity is pulled back to t=1); it extends for 2 ticks, on n0 and n1;
// then the short call lands on n1, whose key now expires at t=1; c1 takes
// n1 and n2 at t=1. The library's rule counts n1 for 1 tick there.
var extendStory = []Event{
	{EvStart, 0, 0}, {EvAcqExec, 0, 0}, {EvAcqExec, 0, 1}, {EvDecide1, 0, 0b011},
	{EvComExec, 0, 0}, {EvComExec, 0, 1}, {EvDecide2, 0, 0b011},
	{EvExtStart, 0, 1}, {EvExtGiveUp, 0, 0}, // extension 1, the shortening: fails
	{EvExtStart, 0, 0}, {EvExtExec, 0, 1*N + 0}, {EvExtExec, 0, 1*N + 1}, {EvExtDecide, 0, 0b011}, // extension 2
	{EvExtExec, 0, 0*N + 1}, // extension 1's call lands on n1
	{EvTick, 0, 0},
	{EvStart, 1, 0}, {EvAcqExec, 1, 1}, {EvAcqExec, 1, 2}, {EvDecide1, 1, 0b110},
	{EvComExec, 1, 1}, {EvComExec, 1, 2}, {EvDecide2, 1, 0b110},
}

func TestExtendTheIssueStory(t *testing.T) {
	v, n := run(extendGround, NewNoUnheard, extendStory)
	if v == nil || v.Prop != PropLease {
		t.Fatalf("without UnheardTTLs: want the story to replay to a lease violation, got %v", v)
	}
	logTrace(t, "the issue's story, without UnheardTTLs", Replay(extendGround, NewNoUnheard, extendStory[:n]))
	for _, rules := range []Rules{New, NewPullOnFailure} {
		if v, _ := run(extendGround, rules, extendStory); v != nil {
			t.Fatalf("%s: %v", rules.Name, v)
		}
	}
	lines := Replay(extendGround, New, extendStory)
	logTrace(t, "the same under the library's rules", lines[12:15])
}

// The library at 467e4dd (NewPullOnFailure): a shortening's call runs on
// n0 at once; the other nodes are slow, so the Extend waits (up to the
// round's patience, which the lock's TTL sets, not the shorter one), and
// the holder's validity is the old one until it returns. n0's key expires
// by the shorter TTL, and c1 takes n0 and a node c0 never held. That code
// pulled the validity back only once the Extend had failed; pulling it
// back as a shortening begins (PullAtStart, the library now) closes this
// (TestShorteningInFlightMovesUntilAtOnce replays it on real nodes).
func TestExtendPullOnFailureIsCaught(t *testing.T) {
	lines := wantLeaseBreak(t, "a shortening in flight", extendGround, NewPullOnFailure)
	if strings.Contains(strings.Join(lines, "\n"), "fails") {
		t.Fatal("want the break while the shortening runs, before it fails")
	}
}

// PullAtStart without UnheardAtStart (NewUnheardAtEnd): a shortening's
// call to a node lands after a later Extend's call there, and its reply
// comes back while that Extend runs. When the Extend is decided the call
// is heard, so the node is counted for the long TTL, though the short call
// cut it. Counting the calls unheard when the Extend began (UnheardAtStart,
// the library now) closes this (TestLateCallHeardDuringALaterExtendStillCounts
// replays it on real nodes).
func TestExtendUnheardAtEndIsCaught(t *testing.T) {
	lines := wantLeaseBreak(t, "a late call heard during the next extension", extendGround, NewUnheardAtEnd)
	if !strings.Contains(strings.Join(lines, "\n"), "hears") {
		t.Fatal("want the break to hear a late reply")
	}
}

// extendDeep are the deep run's searches of extensions (TestDeep).
var extendDeep = []deepCase{
	// extendGround without the reductions of unheard.go: 33,175,160
	// states, 2.1 min.
	{"extensions, no reduction", func() Config { c := extendGround; c.NoReduction = true; return c }(), New, false},
	// Three extensions: 87,820,652 states, 6.5 min.
	{"extensions, three", func() Config { c := extendGround; c.Extends = 3; return c }(), New, false},
	// c1 tries the lock from t=0 too: 14,950,780 states, 47 s. (Both
	// clients extending is beyond 150 million states.)
	{"extensions, c1 from t=0", func() Config { c := extendGround; c.OthersFrom = 0; return c }(), New, false},
}
