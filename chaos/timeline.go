package chaos

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// timeline draws one run as an SVG. The axis ends at the last thing that
// happened (a store operation, a grant, a failure, a fault's start), not at
// the workload's length, which a worker blocked past its last operation can
// stretch to several times the data (clock jumps: 10 s for 3.5 s of data).
// Fault labels are stacked in lanes so that none prints over another, and
// an accepted stale write, the failure fencing exists to prevent, gets a
// mark of its own.
func timeline(r *Result) string {
	h := r.History
	const left, rowH, width, laneH, maxLanes = 90, 28, 1100, 11, 6
	workers := r.Config.Workers
	span := dataEnd(h) + dataEnd(h)/50
	span = max(span, 100*time.Millisecond)
	x := func(d time.Duration) float64 {
		return left + float64(min(d, span))/float64(span)*float64(width-left-10)
	}
	// A label starts at its fault's line, or ends there where it would run
	// past the plot's right edge. Labels go in the first lane whose last
	// label ends left of them.
	faults := slices.Clone(h.Faults)
	slices.SortStableFunc(faults, func(a, b Fault) int { return cmpDur(a.At, b.At) })
	labelFrom := func(f Fault) (from float64, endAnchored bool) {
		if w := labelWidth(short(f)); x(f.At)+2+w > width-2 {
			return x(f.At) - 2 - w, true
		}
		return x(f.At) + 2, false
	}
	var laneEnd []float64
	lane := make([]int, len(faults))
	hidden := 0
	for i, f := range faults {
		lane[i] = -1
		from, _ := labelFrom(f)
		for l := range laneEnd {
			if laneEnd[l] < from {
				lane[i] = l
				break
			}
		}
		if lane[i] < 0 && len(laneEnd) < maxLanes {
			lane[i] = len(laneEnd)
			laneEnd = append(laneEnd, 0)
		}
		if lane[i] < 0 {
			hidden++
			continue
		}
		from, _ = labelFrom(f)
		laneEnd[lane[i]] = from + labelWidth(short(f)) + 6
	}
	top := 26 + laneH*len(laneEnd)
	axisY := top + rowH*workers + 18 // the seconds' labels
	height := axisY + 2
	if h.Length > span {
		height += 12 // a line below them says where the workload ended
	}
	var b strings.Builder
	// The viewBox lets the page scale the drawing down to its width.
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %[1]d %[2]d" font-size="10">`, width, height)
	step := time.Second
	if span <= 3*time.Second {
		step = 500 * time.Millisecond
	}
	for s := time.Duration(0); s <= span; s += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" fill="#999">%gs</text>`,
			x(s), top-8, x(s), axisY-8, x(s)+2, axisY, s.Seconds())
	}
	if h.Length > span {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#999" text-anchor="end">the workload ran %v; nothing happened after %v</text>`,
			width-12, height-2, h.Length.Round(100*time.Millisecond), span.Round(10*time.Millisecond))
	}
	for i := range workers {
		fmt.Fprintf(&b, `<text x="4" y="%d">worker %d</text>`, top+i*rowH+16, i)
	}
	overlapping := conflicting(h.Holds)
	stale := staleWrites(h)
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
		if hold.Token > 0 && x(hold.End)-x(hold.Grant) > 6*float64(len(fmt.Sprint(hold.Token)))+4 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#fff">%d</text>`, x(hold.Grant)+2, y+12, hold.Token)
		}
		for _, op := range []*Op{hold.Read, hold.Write} {
			if op != nil && !op.Accepted && op.Err != "" {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#b00020" font-size="16">&#10007;<title>%s</title></text>`,
					x(op.End)-5, y+14, template.HTMLEscapeString(op.Err))
			}
		}
		if w := hold.Write; w != nil && stale[&h.Holds[i]] {
			// A red diamond with a black ring over the write, and the
			// holding outlined: the store took a write it should have
			// refused.
			cx, cy := x(w.End), float64(y)+float64(rowH-10)/2
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="none" stroke="#b00020" stroke-width="2"/>`,
				x(hold.Grant)-1, y-1, max(x(hold.End)-x(hold.Grant), 1)+2, rowH-8)
			fmt.Fprintf(&b, `<path d="M%.1f %.1f l8 8 l-8 8 l-8 -8 z" fill="#b00020" stroke="#000" stroke-width="1.5"><title>stale write accepted: worker %d, token %d, value %d, at %v</title></path>`,
				cx, cy-8, hold.Worker, hold.Token, w.Value, w.Start.Round(time.Millisecond))
		}
	}
	for i, f := range faults {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#1d4ed8" stroke-dasharray="3,2"><title>%v %s: %s</title></line>`,
			x(f.At), top-6, x(f.At), axisY-8, f.At.Round(time.Millisecond), f.Target, f.What)
		if f.Until > f.At {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="4" fill="#1d4ed8" opacity="0.5"><title>%s: %s</title></rect>`,
				x(f.At), top-8, max(x(f.Until)-x(f.At), 1), f.Target, f.What)
		}
		if lane[i] >= 0 {
			ly := 14 + laneH*lane[i]
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#1d4ed8" stroke-opacity="0.3"/>`, x(f.At), ly, x(f.At), top-6)
			if from, end := labelFrom(f); end {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#1d4ed8" font-size="9" text-anchor="end">%s</text>`,
					x(f.At)-2, ly, template.HTMLEscapeString(short(f)))
			} else {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#1d4ed8" font-size="9">%s</text>`, from, ly, template.HTMLEscapeString(short(f)))
			}
		}
	}
	if hidden > 0 {
		fmt.Fprintf(&b, `<text x="%d" y="10" fill="#1d4ed8" font-size="9" text-anchor="end">%d more fault labels: hover the dashed lines</text>`, width-12, hidden)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// dataEnd is when the last recorded thing happened.
func dataEnd(h *History) time.Duration {
	var end time.Duration
	for _, x := range h.Holds {
		end = max(end, x.Grant, x.End)
		for _, op := range []*Op{x.Read, x.Write} {
			if op != nil {
				end = max(end, op.End)
			}
		}
	}
	for _, f := range h.Failures {
		end = max(end, f.End)
	}
	for _, f := range h.Faults {
		end = max(end, f.At)
	}
	if end == 0 {
		end = h.Length
	}
	return end
}

// staleWrites are the holds whose write the store accepted out of order:
// exactly those checkStoreOrder reports, found through its report (the
// worker and grant time it names first), so the mark and the table agree.
func staleWrites(h *History) map[*Hold]bool {
	type key struct {
		worker int
		grant  time.Duration
	}
	bad := map[key]bool{}
	checkStoreOrder(h, func(_, _ string, args ...any) {
		if len(args) >= 3 {
			w, ok1 := args[0].(int)
			g, ok2 := args[2].(time.Duration)
			if ok1 && ok2 {
				bad[key{w, g}] = true
			}
		}
	})
	out := map[*Hold]bool{}
	for i := range h.Holds {
		if x := &h.Holds[i]; bad[key{x.Worker, x.Grant}] {
			out[x] = true
		}
	}
	return out
}

// labelWidth estimates a 9 px label's width.
func labelWidth(s string) float64 { return 5.2 * float64(utf8.RuneCountInString(s)) }

func short(f Fault) string {
	s := f.Target + " " + f.What
	if utf8.RuneCountInString(s) > 28 {
		s = string([]rune(s)[:28]) + "…"
	}
	return s
}

// conflicting marks the holds that overlap in time a hold they exclude:
// one on the same resource (a mutex's name, a semaphore's slot, a
// multi-lock's member) by another worker, unless both are a read-write
// lock's readers. The family's legal concurrency (readers together,
// permits on different slots, multi-locks on disjoint members) is not
// painted as an overlap; more than K permits at once is the permits
// check's, in the table.
func conflicting(holds []Hold) map[int]bool {
	out := map[int]bool{}
	for i := range holds {
		for j := range holds {
			a, c := holds[i], holds[j]
			if i == j || a.Resource != c.Resource || a.Reader && c.Reader || a.Worker == c.Worker && a.Seq == c.Seq {
				continue
			}
			if a.Grant < c.End && c.Grant < a.End {
				out[i] = true
			}
		}
	}
	return out
}
