package chaos

import (
	"strings"
	"testing"
)

// The observer check fails a fenced run whose observer was told of a
// lower term after a higher one, per observer: two observers each in
// order, interleaved, pass.
func TestObserverOrderCatchesAnOlderTermAfterANewerOne(t *testing.T) {
	in := []Observation{{0, ms(1), 10, "w0#0"}, {1, ms(2), 12, "w1#0"}, {0, ms(3), 12, "w1#0"}, {1, ms(4), 14, "w2#0"}}
	out := append(in[:len(in):len(in)], Observation{0, ms(5), 10, "w0#0"})
	for _, tc := range []struct {
		name   string
		h      *History
		caught int
	}{
		{"in order", &History{Fenced: true, Observed: in}, 0},
		{"an older term after a newer", &History{Fenced: true, Observed: out}, 1},
		{"without fencing terms are no tokens", &History{Observed: out}, 0},
	} {
		var f Findings
		if n := checkObservers(tc.h, f.addViolation); n != tc.caught {
			t.Errorf("%s: caught %d, want %d: %v", tc.name, n, tc.caught, f.Violations)
		}
		if tc.caught > 0 && (len(f.Violations) == 0 || f.Violations[0].Check != CheckObserverOrder ||
			!strings.Contains(f.Violations[0].Detail, "observer 0")) {
			t.Errorf("%s: evidence %v", tc.name, f.Violations)
		}
	}
	// A leader reported with another term than its Campaign's.
	wrong := &History{Fenced: true, Holds: []Hold{hold(0, 1, 2, 10, nil)}, Observed: []Observation{{0, ms(3), 0, "w0#0"}}}
	var f Findings
	if n := checkObservers(wrong, f.addViolation); n != 1 || !strings.Contains(f.Violations[0].Detail, "Campaign returned term 10") {
		t.Errorf("a leader observed with term 0 instead of 10: caught %d, %v", n, f.Violations)
	}
	h := &History{Fenced: true, Primitive: Election, Holds: []Hold{hold(0, 1, 2, 10, nil)}, Observed: out}
	if v := judge(Scenario{}, true, h, CheckFamily(h), nil); v.OK {
		t.Errorf("a run whose observer went back a term is judged %q", v.Text)
	}
}

// Failover is measured from a release to the next grant, and from a
// stalled leader's grant (its pause starts there) to the next grant.
func TestFailoverSummaryMeasuresEachHandover(t *testing.T) {
	h := &History{Primitive: Election, TTL: ms(100), Holds: []Hold{
		hold(0, 0, 30, 1, nil),    // resigns at 30
		hold(1, 35, 60, 2, nil),   // elected 5 ms later; stalls
		hold(2, 150, 170, 3, nil), // elected 115 ms after the stalled leader's grant
		hold(0, 171, 200, 4, nil), // 1 ms after a release
	}}
	h.Holds[1].Paused = ms(120)
	got := failoverSummary(h)
	want := "failover: after a resign 2, median 5ms, max 5ms (0.05 of the TTL); after a leader stalled 1, median 115ms, max 115ms (1.15 of the TTL)"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if failoverSummary(&History{Primitive: RWLock, Holds: h.Holds}) != "" {
		t.Error("a failover summary for a workload without leaders")
	}
}
