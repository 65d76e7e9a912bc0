package chaos

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/anishathalye/porcupine"
)

// tableHeader is the summary's columns, defined in docs/chaos.md
// ("Reading the table").
var tableHeader = []string{"scenario", "fencing", "operations", "overlaps", "lease overlaps", "stale rejected",
	"stale accepted", "duplicates", "lost writes", "porcupine", "verdict"}

// tableRow is one run's line of the summary. operations counts the
// acquisitions that succeeded: the critical sections the workers ran.
func tableRow(r *Result) []string {
	f := r.Findings
	return []string{r.Name(), fencingMode(r.Config.Fenced), fmt.Sprint(len(r.History.Holds)),
		fmt.Sprint(f.Overlaps), fmt.Sprint(f.LeaseOverlaps), fmt.Sprint(f.StaleRejected), fmt.Sprint(f.StaleAccepted + f.StaleReads),
		fmt.Sprint(f.Duplicates), fmt.Sprint(f.LostWrites), modelSummary(r.Models), r.Verdict.Text}
}

// fencingMode is how the table, the evidence and the report's headings
// name a run's mode, so that all three agree.
func fencingMode(fenced bool) string {
	if fenced {
		return "on"
	}
	return "off"
}

// WriteTable prints one line per run: the summary people read first.
func WriteTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(tableHeader, "\t")+"\t")
	for _, r := range results {
		fmt.Fprintln(tw, strings.Join(tableRow(r), "\t")+"\t")
	}
	return tw.Flush()
}

// modelSummary is porcupine's column: "ok" when every model it checked is
// linearizable, else what it found.
func modelSummary(ms []ModelCheck) string {
	var bad []string
	for _, m := range ms {
		if m.Result != porcupine.Ok {
			bad = append(bad, strings.ToLower(string(m.Result))+": "+m.Model)
		}
	}
	if len(ms) == 0 {
		return "-"
	}
	if len(bad) == 0 {
		return "ok"
	}
	return strings.Join(bad, "; ")
}

// WriteEvidence prints, for every run, what each checker concluded: the
// hand-written checkers' evidence where they found something, what the
// fence refused, the tokens, and porcupine's verdict on each model.
func WriteEvidence(w io.Writer, results []*Result) {
	for _, r := range results {
		fmt.Fprintf(w, "\n%s, fencing %s:\n", r.Name(), fencingMode(r.Config.Fenced))
		for _, line := range evidence(r) {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// evidence is one run's lines, for the text and the HTML alike.
func evidence(r *Result) []string {
	var lines []string
	if len(r.Findings.Violations) == 0 {
		lines = append(lines, "hand-written checkers: nothing found")
	}
	for _, v := range append(slices.Clone(r.Findings.Violations), r.Findings.Refusals...) {
		lines = append(lines, fmt.Sprintf("[%s] %s", v.Check, v.Detail))
	}
	for _, s := range []string{tokenSummary(r.History), failoverSummary(r.History), observedSummary(r.History)} {
		if s != "" {
			lines = append(lines, s)
		}
	}
	for _, m := range r.Models {
		lines = append(lines, fmt.Sprintf("porcupine, %s", m))
	}
	return lines
}

// WriteHTML writes a self-contained report: the table, then a timeline per
// run with one row per worker, its holdings and tokens, the store's
// refusals, and the faults. It fits a page 1400 px wide: the table wraps
// its verdicts and scrolls sideways on narrower pages, and each timeline
// scales down to the page's width.
func WriteHTML(w io.Writer, results []*Result) error {
	type run struct {
		Title, Verdict string
		OK             bool
		Evidence       []string
		SVG            template.HTML
	}
	var runs []run
	var rows [][]string
	for _, r := range results {
		runs = append(runs, run{
			Title:    fmt.Sprintf("%s, fencing %s: %s", r.Name(), fencingMode(r.Config.Fenced), r.Config.Scenario.Fault),
			Verdict:  r.Verdict.Text,
			OK:       r.Verdict.OK,
			Evidence: evidence(r),
			SVG:      template.HTML(timeline(r)),
		})
		rows = append(rows, tableRow(r))
	}
	return reportTmpl.Execute(w, struct {
		Header []string
		Rows   [][]string
		Runs   []run
	}{tableHeader, rows, runs})
}

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>redlock chaos report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
.table{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font:12px monospace}
th,td{padding:3px 8px;border-bottom:1px solid #e5e5e5;text-align:right;vertical-align:top;white-space:nowrap}
th{background:#f6f6f6;font-weight:600}
th:first-child,td:first-child,th:last-child,td:last-child{text-align:left}
td:last-child{min-width:14em;white-space:normal}
h2{font-size:16px;margin-top:2em}
.ok{color:#176b2c}.bad{color:#b00020;font-weight:bold}
.legend span{display:inline-block;margin-right:1.5em}
svg{border:1px solid #ddd;background:#fff;max-width:100%;height:auto}
li{font-family:monospace;font-size:12px;overflow-wrap:anywhere}
</style></head><body>
<h1>redlock chaos report</h1>
<div class="table">
<table>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
</div>
<p>operations: the acquisitions that succeeded, each one worker's read-modify-write of the counter.
Every column is defined in docs/chaos.md, under "Reading the table".</p>
<p class="legend"><span>&#9646; holding: grant to last store operation, labelled with its token</span>
<span style="color:#888">&#9646; client paused</span>
<span style="color:#b00020">&#10007; store refused a stale operation (the evidence says whose, against which token)</span>
<span style="color:#d97706">&#9646; critical sections that overlap</span>
<span style="color:#b00020">&#9670; stale write accepted: the store took an older holder's write after a newer one's (outlined holding)</span>
<span style="color:#1d4ed8">| fault (labels stacked above; hover for details)</span></p>
<p>Tokens are not consecutive: a token is counter*256 + node id, and each node's counter moves on every
acquisition attempt that reaches it, refused ones included, so the retries of workers waiting for the
lock put gaps of thousands between successive holders' tokens. Each fenced run's evidence gives them.</p>
{{range .Runs}}
<h2>{{.Title}} &mdash; <span class="{{if .OK}}ok{{else}}bad{{end}}">{{.Verdict}}</span></h2>
{{.SVG}}
<ul>{{range .Evidence}}<li>{{.}}</li>{{end}}</ul>
{{end}}
</body></html>
`))
