package chaos

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/anishathalye/porcupine"
)

// WriteTable prints one line per run: the summary people read first.
func WriteTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tfencing\toperations\toverlaps\tlease overlaps\tstale rejected\tstale accepted\tduplicates\tlost writes\tporcupine\tverdict\t")
	for _, r := range results {
		mode := "off"
		if r.Config.Fenced {
			mode = "on"
		}
		f := r.Findings
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.Config.Scenario.Name, mode, len(r.History.Holds),
			f.Overlaps, f.LeaseOverlaps, f.StaleRejected, f.StaleAccepted, f.Duplicates, f.LostWrites, modelSummary(r.Models), r.Verdict.Text)
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
// hand-written checkers' evidence where they found something, and
// porcupine's verdict on each model.
func WriteEvidence(w io.Writer, results []*Result) {
	for _, r := range results {
		fmt.Fprintf(w, "\n%s, fencing %v:\n", r.Config.Scenario.Name, r.Config.Fenced)
		if len(r.Findings.Violations) == 0 {
			fmt.Fprintf(w, "  hand-written checkers: nothing found\n")
		}
		for _, v := range r.Findings.Violations {
			fmt.Fprintf(w, "  [%s] %s\n", v.Check, v.Detail)
		}
		for _, m := range r.Models {
			fmt.Fprintf(w, "  porcupine, %s\n", m)
		}
	}
}

// WriteHTML writes a self-contained report: the table, then a timeline per
// run with one row per worker, its holdings and tokens, the store's
// refusals, and the faults.
func WriteHTML(w io.Writer, results []*Result) error {
	type run struct {
		Title, Verdict string
		OK             bool
		Findings       Findings
		Models         []ModelCheck
		SVG            template.HTML
	}
	var runs []run
	for _, r := range results {
		mode := "without fencing"
		if r.Config.Fenced {
			mode = "with fencing"
		}
		runs = append(runs, run{
			Title:    fmt.Sprintf("%s, %s: %s", r.Config.Scenario.Name, mode, r.Config.Scenario.Fault),
			Verdict:  r.Verdict.Text,
			OK:       r.Verdict.OK,
			Findings: r.Findings,
			Models:   r.Models,
			SVG:      template.HTML(timeline(r)),
		})
	}
	var table strings.Builder
	WriteTable(&table, results)
	return reportTmpl.Execute(w, struct {
		Table string
		Runs  []run
	}{table.String(), runs})
}

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>redlock chaos report</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
pre{background:#f6f6f6;padding:1em;overflow-x:auto}
h2{font-size:16px;margin-top:2em}
.ok{color:#176b2c}.bad{color:#b00020;font-weight:bold}
.legend span{display:inline-block;margin-right:1.5em}
svg{border:1px solid #ddd;background:#fff}
li{font-family:monospace;font-size:12px}
</style></head><body>
<h1>redlock chaos report</h1>
<pre>{{.Table}}</pre>
<p class="legend"><span>&#9646; holding: grant to last store operation, labelled with its token</span>
<span style="color:#888">&#9646; client paused</span>
<span style="color:#b00020">&#10007; store refused a stale operation</span>
<span style="color:#d97706">&#9646; critical sections that overlap</span>
<span style="color:#b00020">&#9670; stale write accepted: the store took an older holder's write after a newer one's (outlined holding)</span>
<span style="color:#1d4ed8">| fault (labels stacked above; hover for details)</span></p>
{{range .Runs}}
<h2>{{.Title}} &mdash; <span class="{{if .OK}}ok{{else}}bad{{end}}">{{.Verdict}}</span></h2>
{{.SVG}}
<ul>{{range .Findings.Violations}}<li>[{{.Check}}] {{.Detail}}</li>{{else}}<li>hand-written checkers: nothing found</li>{{end}}
{{range .Models}}<li>porcupine, {{.}}</li>{{end}}</ul>
{{end}}
</body></html>
`))
