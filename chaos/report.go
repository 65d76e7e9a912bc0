package chaos

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints one line per run: the summary people read first.
func WriteTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tfencing\toperations\toverlaps\tlease overlaps\tstale rejected\tstale accepted\tduplicates\tlost writes\tverdict\t")
	for _, r := range results {
		mode := "off"
		if r.Config.Fenced {
			mode = "on"
		}
		f := r.Findings
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Config.Scenario.Name, mode, len(r.History.Holds),
			f.Overlaps, f.LeaseOverlaps, f.StaleRejected, f.StaleAccepted, f.Duplicates, f.LostWrites, r.Verdict.Text)
	}
	return tw.Flush()
}

// WriteEvidence prints the checkers' evidence for every run that has some.
func WriteEvidence(w io.Writer, results []*Result) {
	for _, r := range results {
		if len(r.Findings.Violations) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s, fencing %v:\n", r.Config.Scenario.Name, r.Config.Fenced)
		for _, v := range r.Findings.Violations {
			fmt.Fprintf(w, "  [%s] %s\n", v.Check, v.Detail)
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
<span style="color:#1d4ed8">| fault</span></p>
{{range .Runs}}
<h2>{{.Title}} &mdash; <span class="{{if .OK}}ok{{else}}bad{{end}}">{{.Verdict}}</span></h2>
{{.SVG}}
{{if .Findings.Violations}}<ul>{{range .Findings.Violations}}<li>[{{.Check}}] {{.Detail}}</li>{{end}}</ul>{{end}}
{{end}}
</body></html>
`))

// timeline draws one run as an SVG.
func timeline(r *Result) string {
	h := r.History
	const left, rowH, top, width = 90, 28, 40, 1100
	workers := r.Config.Workers
	height := top + rowH*workers + 20
	span := max(h.Length, time.Millisecond)
	x := func(d time.Duration) float64 { return left + float64(d)/float64(span)*float64(width-left-10) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-size="10">`, width, height)
	for s := time.Duration(0); s <= span; s += time.Second {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" fill="#999">%ds</text>`,
			x(s), top-8, x(s), height-10, x(s)+2, height-2, int(s.Seconds()))
	}
	for i := range workers {
		fmt.Fprintf(&b, `<text x="4" y="%d">worker %d</text>`, top+i*rowH+16, i)
	}
	overlapping := map[int]bool{}
	for i := range h.Holds {
		for j := range h.Holds {
			a, c := h.Holds[i], h.Holds[j]
			if i != j && a.Grant < c.End && c.Grant < a.End {
				overlapping[i] = true
			}
		}
	}
	for i, hold := range h.Holds {
		y := top + hold.Worker*rowH + 4
		fill := "#4caf50"
		if overlapping[i] {
			fill = "#d97706"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>worker %d, token %d, granted %v, valid until %v, nodes %s</title></rect>`,
			x(hold.Grant), y, max(x(hold.End)-x(hold.Grant), 1), rowH-10, fill, hold.Worker, hold.Token, hold.Grant.Round(time.Millisecond), hold.Until.Round(time.Millisecond), hold.Nodes)
		if hold.Paused > 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#888" opacity="0.8"><title>paused %v</title></rect>`,
				x(hold.Grant), y, x(hold.Grant+hold.Paused)-x(hold.Grant), rowH-10, hold.Paused)
		}
		if hold.Token > 0 && x(hold.End)-x(hold.Grant) > 18 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#fff">%d</text>`, x(hold.Grant)+2, y+12, hold.Token)
		}
		for _, op := range []*Op{hold.Read, hold.Write} {
			if op != nil && !op.Accepted && op.Err != "" {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#b00020" font-size="16">&#10007;<title>%s</title></text>`,
					x(op.End)-5, y+14, template.HTMLEscapeString(op.Err))
			}
		}
	}
	for _, f := range h.Faults {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#1d4ed8" stroke-dasharray="3,2"><title>%v %s: %s</title></line>`,
			x(f.At), top-12, x(f.At), height-14, f.At.Round(time.Millisecond), f.Target, f.What)
		if f.Until > f.At {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="4" fill="#1d4ed8" opacity="0.5"><title>%s: %s</title></rect>`,
				x(f.At), top-14, x(f.Until)-x(f.At), f.Target, f.What)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#1d4ed8" font-size="9">%s</text>`, x(f.At)+2, top-18, template.HTMLEscapeString(short(f)))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func short(f Fault) string {
	s := f.Target + " " + f.What
	if len(s) > 28 {
		s = s[:28] + "…"
	}
	return s
}
