package chaos

import (
	"testing"
	"time"
)

// Known-bad histories: each checker must flag its own violation, and a
// good history must come out clean.

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func hold(worker int, grant, end int, token uint64, write *Op) Hold {
	return Hold{Worker: worker, Invoke: ms(grant - 1), Grant: ms(grant), End: ms(end), Until: ms(end), Token: token, Write: write}
}

func withUntil(x Hold, until int) Hold {
	x.Until = ms(until)
	return x
}

func wrote(start, end int, v int64) *Op {
	return &Op{Start: ms(start), End: ms(end), Value: v, Accepted: true}
}

func TestCheckGoodHistory(t *testing.T) {
	h := &History{Fenced: true, Acked: 3, Final: 3, Holds: []Hold{
		hold(0, 0, 10, 256, wrote(5, 9, 1)),
		hold(1, 20, 30, 512, wrote(25, 29, 2)),
		hold(0, 40, 50, 768, wrote(45, 49, 3)),
	}}
	if f := Check(h); len(f.Violations) != 0 {
		t.Fatalf("a good history was flagged: %+v", f.Violations)
	}
}

func TestCheckersCatchTheirViolations(t *testing.T) {
	cases := []struct {
		name  string
		h     *History
		check string
		count func(Findings) int
	}{
		{"stale write accepted", &History{Fenced: true, Acked: 2, Final: 2, Holds: []Hold{
			hold(0, 0, 100, 256, wrote(90, 99, 2)), // the old holder writes last
			hold(1, 20, 40, 512, wrote(25, 30, 1)),
		}}, CheckStoreOrder, func(f Findings) int { return f.StaleAccepted }},
		{"stale write accepted without tokens", &History{Acked: 2, Final: 2, Holds: []Hold{
			hold(0, 0, 100, 0, wrote(90, 99, 2)),
			hold(1, 20, 40, 0, wrote(25, 30, 1)),
		}}, CheckStoreOrder, func(f Findings) int { return f.StaleAccepted }},
		{"duplicate token", &History{Fenced: true, Holds: []Hold{
			hold(0, 0, 10, 256, nil), hold(1, 20, 30, 256, nil),
		}}, CheckDuplicates, func(f Findings) int { return f.Duplicates }},
		{"token went backwards", &History{Fenced: true, Holds: []Hold{
			hold(0, 0, 10, 2048, nil), hold(1, 20, 30, 513, nil),
		}}, CheckRealTime, func(f Findings) int { return f.TokenOrder }},
		{"lost write", &History{Acked: 2, Final: 1, Holds: []Hold{
			hold(0, 0, 50, 0, wrote(40, 45, 1)), hold(1, 20, 60, 0, wrote(50, 55, 1)),
		}}, CheckLostWrites, func(f Findings) int { return f.LostWrites }},
		{"overlap", &History{Holds: []Hold{
			hold(0, 0, 50, 0, nil), hold(1, 20, 60, 0, nil),
		}}, CheckOverlap, func(f Findings) int { return f.Overlaps }},
		{"lease overlap", &History{Holds: []Hold{
			withUntil(hold(0, 0, 50, 0, nil), 100), withUntil(hold(1, 20, 60, 0, nil), 100),
		}}, CheckLease, func(f Findings) int { return f.LeaseOverlaps }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Check(tc.h)
			if tc.count(f) == 0 {
				t.Fatalf("not caught: %+v", f)
			}
			found := false
			for _, v := range f.Violations {
				found = found || v.Check == tc.check
			}
			if !found {
				t.Fatalf("no %s evidence in %+v", tc.check, f.Violations)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	h := &History{Holds: []Hold{{}}}
	s := Scenario{Unfenced: Expected}
	if v := judge(s, false, h, Findings{}, nil); v.OK {
		t.Fatalf("an expected overlap that did not happen passed: %v", v)
	}
	if v := judge(s, false, h, Findings{Overlaps: 1, StaleAccepted: 1}, nil); !v.OK {
		t.Fatalf("an expected overlap failed: %v", v)
	}
	if v := judge(s, true, h, Findings{Overlaps: 1, StaleAccepted: 1}, nil); v.OK {
		t.Fatalf("a stale write accepted with fencing passed: %v", v)
	}
	if v := judge(Scenario{Unfenced: Holds}, false, h, Findings{Overlaps: 1}, nil); v.OK {
		t.Fatalf("an overlap where exclusion holds passed: %v", v)
	}
	if v := judge(Scenario{Unfenced: Holds}, false, h, Findings{Overlaps: 1, LeaseOverlaps: 1, Overruns: 1}, nil); v.OK {
		t.Fatalf("overlapping leases passed: %v", v)
	}
}
