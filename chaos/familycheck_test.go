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
