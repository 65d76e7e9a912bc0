package chaos

import (
	"strings"
	"testing"
)

// Each family checker can fail: a history with the violation is caught,
// the same history without it is not.
func TestFamilyCheckersCatchTheirViolations(t *testing.T) {
	write := func(start, end, v int) *Op {
		return &Op{Start: ms(start), End: ms(end), Value: int64(v), Accepted: true}
	}
	read := func(start, end int) *Op { return &Op{Start: ms(start), End: ms(end), Accepted: true} }
	held := func(worker, grant, end int, token uint64, res string, reader bool, r, w *Op) Hold {
		x := hold(worker, grant, end, token, w)
		x.Resource, x.Reader, x.Read = res, reader, r
		return x
	}
	for _, tc := range []struct {
		name  string
		h     *History
		check string
	}{
		{"readers share", &History{Fenced: true, Finals: map[string]int64{"doc": 0}, Holds: []Hold{
			held(0, 10, 50, 5, "doc", true, read(11, 12), nil),
			held(1, 20, 60, 6, "doc", true, read(21, 22), nil),
		}}, ""},
		{"a writer overlaps a reader", &History{Fenced: true, Finals: map[string]int64{"doc": 1}, Holds: []Hold{
			held(0, 10, 50, 5, "doc", true, read(11, 12), nil),
			held(1, 20, 60, 6, "doc", false, read(21, 22), write(30, 31, 1)),
		}}, CheckLease},
		{"a stale read accepted", &History{Fenced: true, Finals: map[string]int64{"doc": 1}, Holds: []Hold{
			held(0, 10, 20, 9, "doc", false, read(11, 12), write(13, 14, 1)),
			held(1, 30, 40, 7, "doc", true, read(31, 32), nil),
		}}, CheckStaleRead},
		{"a reader's token below an earlier writer's", &History{Fenced: true, Finals: map[string]int64{"doc": 1}, Holds: []Hold{
			held(0, 10, 20, 9, "doc", false, read(11, 12), write(13, 14, 1)),
			held(1, 30, 40, 8, "doc", true, nil, nil),
		}}, CheckRealTime},
		{"slots kept apart", &History{Fenced: true, Permits: 2, Finals: map[string]int64{"s#0": 1, "s#1": 1}, Holds: []Hold{
			held(0, 10, 50, 5, "s#0", false, read(11, 12), write(13, 14, 1)),
			held(1, 20, 60, 6, "s#1", false, read(21, 22), write(23, 24, 1)),
		}}, ""},
		{"three permits of two", &History{Permits: 2, Finals: map[string]int64{"s#0": 1, "s#1": 1, "s#2": 1}, Holds: []Hold{
			held(0, 10, 50, 5, "s#0", false, read(11, 12), write(13, 14, 1)),
			held(1, 20, 60, 6, "s#1", false, read(21, 22), write(23, 24, 1)),
			held(2, 30, 70, 7, "s#2", false, read(31, 32), write(33, 34, 1)),
		}}, CheckPermits},
		{"a member held twice", &History{Fenced: true, Finals: map[string]int64{"a": 1, "b": 2}, Holds: []Hold{
			held(0, 10, 50, 5, "a", false, read(11, 12), write(13, 14, 1)),
			held(0, 10, 50, 5, "b", false, read(11, 12), write(13, 14, 1)),
			held(1, 20, 60, 6, "b", false, read(21, 22), write(23, 24, 2)),
		}}, CheckLease},
	} {
		f := CheckFamily(tc.h)
		var got []string
		for _, v := range f.Violations {
			got = append(got, v.Check)
		}
		switch {
		case tc.check == "" && len(got) > 0:
			t.Errorf("%s: found %v, want nothing", tc.name, f.Violations)
		case tc.check != "" && !strings.Contains(strings.Join(got, ","), tc.check):
			t.Errorf("%s: found %v, want %s", tc.name, got, tc.check)
		}
	}
}

// Two multi-locks that overlap on both their members are one finding,
// naming the members (issue 35: it was listed once per member, naming
// none), and the timeline paints only holds that exclude each other:
// readers together, different slots and disjoint members stay green.
func TestFamilyFindingsNameTheMemberAndTheTimelinePaintsOnlyConflicts(t *testing.T) {
	h := &History{Fenced: true, Finals: map[string]int64{"a": 1, "b": 1}}
	for _, res := range []string{"a", "b"} {
		x, y := hold(0, 10, 50, 5, nil), hold(1, 20, 60, 6, nil)
		x.Resource, y.Resource = res, res
		h.Holds = append(h.Holds, x, y)
	}
	f := CheckFamily(h)
	leases := 0
	for _, v := range f.Violations {
		if v.Check == CheckLease {
			leases++
			if !strings.Contains(v.Detail, "on a, b: ") {
				t.Errorf("the finding does not name both members: %q", v.Detail)
			}
		}
	}
	if leases != 1 {
		t.Errorf("%d lease findings for one overlap of two multi-locks on two members, want 1: %v", leases, f.Violations)
	}

	legal := []Hold{hold(0, 10, 50, 5, nil), hold(1, 20, 60, 6, nil), hold(2, 20, 60, 7, nil), hold(3, 20, 60, 8, nil)}
	legal[0].Resource, legal[0].Reader = "doc", true
	legal[1].Resource, legal[1].Reader = "doc", true
	legal[2].Resource = "s#0"
	legal[3].Resource = "s#1"
	if c := conflicting(legal); len(c) != 0 {
		t.Errorf("legal concurrency painted as overlapping: %v", c)
	}
	legal[1].Reader = false // a writer beside a reader
	if c := conflicting(legal); !c[0] || !c[1] || c[2] || c[3] {
		t.Errorf("a writer beside a reader: painted %v, want holds 0 and 1", c)
	}
}
