package chaos

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// The report's timeline (issue 14): the axis ends with the data, not with
// the workload's length; labels of faults that start together do not print
// over each other; an accepted stale write has its own mark.
func TestTimelineScalesStacksAndMarksStaleWrites(t *testing.T) {
	ms := time.Millisecond
	h := &History{Fenced: true, Length: 10 * time.Second, Holds: []Hold{
		{Worker: 0, Grant: 100 * ms, End: 2100 * ms, Token: 10, Write: &Op{Start: 2000 * ms, End: 2100 * ms, Accepted: true}},
		{Worker: 1, Grant: 900 * ms, End: 1100 * ms, Token: 20, Write: &Op{Start: 1000 * ms, End: 1100 * ms, Accepted: true}},
	}}
	for range 3 {
		h.Faults = append(h.Faults, Fault{At: 500 * ms, Target: "n0,n1,n2", What: "clock +2xTTL"})
	}
	r := &Result{Config: Config{Workers: 2, Fenced: true}, History: h}
	if n := checkStoreOrder(h, func(string, string, ...any) {}); n != 1 {
		t.Fatalf("the history has %d stale writes, want 1", n)
	}
	svg := timeline(r)
	if strings.Contains(svg, ">10s<") || strings.Contains(svg, ">5s<") {
		t.Error("the axis runs to the workload's 10 s, not to the data's 2.1 s")
	}
	ys := map[string]bool{}
	for _, m := range regexp.MustCompile(`<text x="[\d.]+" y="(\d+)" fill="#1d4ed8" font-size="9">`).FindAllStringSubmatch(svg, -1) {
		ys[m[1]] = true
	}
	if len(ys) != 3 {
		t.Errorf("three faults at one moment: labels on %d distinct lines, want 3", len(ys))
	}
	if c := strings.Count(svg, "stale write accepted"); c != 1 {
		t.Errorf("%d stale-write marks, want 1", c)
	}
}
