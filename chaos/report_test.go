package chaos

import (
	"html"
	"regexp"
	"strconv"
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

// pausedRun is a fenced client-pause run as the harness records it: worker
// 3 takes token 28931 and is paused; workers 2 and 0 take the lock with
// 67588 and 72707 and write; worker 3 wakes up and its read is refused
// against 72707, so it never writes.
func pausedRun() *Result {
	ms := time.Millisecond
	h := &History{Scenario: "client-pause", Fenced: true, TTL: time.Second, Length: 4 * time.Second, Holds: []Hold{
		{Worker: 1, Invoke: 0, Grant: 10 * ms, Until: 1000 * ms, End: 400 * ms, Token: 19460,
			Read:  &Op{Start: 20 * ms, End: 30 * ms, Value: 0, Accepted: true},
			Write: &Op{Start: 230 * ms, End: 240 * ms, Value: 1, Accepted: true}},
		{Worker: 3, Invoke: 400 * ms, Grant: 646 * ms, Until: 1630 * ms, End: 2646 * ms, Token: 28931, Paused: 2 * time.Second,
			Read: &Op{Start: 2640 * ms, End: 2646 * ms, Refused: true, Highest: 72707,
				Err: `fence: stale fencing token for "chaos:client-pause": got 28931, already admitted 72707`}},
		{Worker: 2, Invoke: 700 * ms, Grant: 1651 * ms, Until: 2640 * ms, End: 1852 * ms, Token: 67588,
			Read:  &Op{Start: 1652 * ms, End: 1660 * ms, Value: 1, Accepted: true},
			Write: &Op{Start: 1850 * ms, End: 1852 * ms, Value: 2, Accepted: true}},
		{Worker: 0, Invoke: 800 * ms, Grant: 1855 * ms, Until: 2845 * ms, End: 2060 * ms, Token: 72707,
			Read:  &Op{Start: 1856 * ms, End: 1860 * ms, Value: 2, Accepted: true},
			Write: &Op{Start: 2050 * ms, End: 2060 * ms, Value: 3, Accepted: true}},
	}, Faults: []Fault{{At: 646 * ms, Until: 2640 * ms, Target: "worker 3", What: "client paused"}}, Acked: 3, Final: 3}
	r := &Result{Config: Config{Scenario: Scenario{Name: "client-pause", Fault: "a holder stops for 2x TTL right after acquiring"},
		Fenced: true, Workers: 4}, History: h}
	r.Findings = Check(h)
	r.Verdict = Verdict{OK: true, Text: "ok: overlap, no stale write"}
	return r
}

// Issue 23: the evidence named the overlaps of a fenced client pause but
// not the operation the fence refused, which is the point of the run.
func TestEvidenceShowsTheRefusedOperation(t *testing.T) {
	r := pausedRun()
	var text, page strings.Builder
	WriteEvidence(&text, []*Result{r})
	if err := WriteHTML(&page, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`\[stale-refused\] worker 3's read \(token 28931, granted at 646ms, paused 2s\) refused at 2\.64s: ` +
		`the store had already admitted token 72707 \(worker 0's, granted at 1\.855s\); ` +
		`worker 3 never wrote`)
	for name, out := range map[string]string{"evidence": text.String(), "HTML": html.UnescapeString(page.String())} {
		if !want.MatchString(out) {
			t.Errorf("the %s does not show the refused read:\n%s", name, out)
		}
	}
}

// Issue 23: the evidence said "fencing false/true" where the table says
// off/on.
func TestReportSaysFencingOffAndOn(t *testing.T) {
	on := pausedRun()
	off := pausedRun()
	off.Config.Fenced = false
	var table, text, page strings.Builder
	if err := WriteTable(&table, []*Result{off, on}); err != nil {
		t.Fatal(err)
	}
	WriteEvidence(&text, []*Result{off, on})
	if err := WriteHTML(&page, []*Result{off, on}); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"table": table.String(), "evidence": text.String(), "HTML": page.String()} {
		if strings.Contains(out, "fencing true") || strings.Contains(out, "fencing false") {
			t.Errorf("the %s says fencing true/false:\n%s", name, out)
		}
	}
	for _, want := range []string{"client-pause, fencing off:", "client-pause, fencing on:"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the evidence lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{"client-pause, fencing off", "client-pause, fencing on"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the HTML lacks %q", want)
		}
	}
}

// Issue 23: successive holders' tokens differ by tens of thousands, and
// the report did not say why. It now gives the gaps and the reason: a
// token is counter*256 + node id, and every attempt takes a counter.
func TestReportExplainsTokenGaps(t *testing.T) {
	r := pausedRun()
	var text, page strings.Builder
	WriteEvidence(&text, []*Result{r})
	if err := WriteHTML(&page, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	// Granted in order 19460, 28931, 67588, 72707: gaps 9471, 38657, 5119.
	want := "tokens: 4 granted, 19460 to 72707; successive tokens differ by 5119 to 38657 (median 9471), " +
		"about 20 to 151 counter steps"
	for name, out := range map[string]string{"evidence": text.String(), "HTML": html.UnescapeString(page.String())} {
		if !strings.Contains(out, want) {
			t.Errorf("the %s lacks %q:\n%s", name, want, out)
		}
		if !strings.Contains(out, "counter*256 + node id") {
			t.Errorf("the %s does not say how a token is made", name)
		}
	}
}

// Issue 23: at 1400 px the summary table was cut (a <pre> wider than the
// page) and fault labels near the right edge ran out of the plot.
func TestReportFitsItsWidth(t *testing.T) {
	ms := time.Millisecond
	r := pausedRun()
	h := r.History
	end := dataEnd(h)
	for _, at := range []time.Duration{end - 10*ms, end - 300*ms, end} {
		h.Faults = append(h.Faults, Fault{At: at, Target: "n0,n1,n2", What: "clock +2xTTL"})
	}
	svg := timeline(r)
	width, _ := strconv.ParseFloat(regexp.MustCompile(`<svg [^>]*width="(\d+)"`).FindStringSubmatch(svg)[1], 64)
	labels := regexp.MustCompile(`<text x="([\d.]+)" y="\d+" fill="#1d4ed8" font-size="9"( text-anchor="end")?>([^<]*)</text>`).FindAllStringSubmatch(svg, -1)
	if len(labels) != len(h.Faults) {
		t.Fatalf("%d fault labels for %d faults", len(labels), len(h.Faults))
	}
	for _, l := range labels {
		x, _ := strconv.ParseFloat(l[1], 64)
		from, to := x, x+labelWidth(html.UnescapeString(l[3]))
		if l[2] != "" {
			from, to = x-labelWidth(html.UnescapeString(l[3])), x
		}
		if from < 0 || to > width {
			t.Errorf("label %q spans [%.0f, %.0f], outside the plot's [0, %.0f]", l[3], from, to, width)
		}
	}
	if !strings.Contains(svg, `viewBox="0 0 `) {
		t.Error("the timeline has no viewBox: it cannot shrink to a narrower page")
	}

	var out strings.Builder
	if err := WriteHTML(&out, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	if strings.Contains(page, "<pre>") {
		t.Error("the summary table is a <pre>, which does not wrap")
	}
	if !regexp.MustCompile(`<div class="table">\s*<table>`).MatchString(page) || !strings.Contains(page, ".table{overflow-x:auto") {
		t.Error("the summary table is not an HTML table in a horizontally scrolling box")
	}
	for _, col := range []string{"<th>operations</th>", "<th>stale rejected</th>", "<td>on</td>"} {
		if !strings.Contains(page, col) {
			t.Errorf("the table lacks %s", col)
		}
	}
}
