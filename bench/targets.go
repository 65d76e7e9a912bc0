package main

import (
	"fmt"
	"strings"
)

// The targets of issue 13. Every figure is computed within one run, then
// its median and range taken over the runs; the verdict is on the median.

// across collects f over the runs.
func (r *report) across(f func(rd *runData) float64) spread {
	xs := make([]float64, len(r.runs))
	for i, rd := range r.runs {
		xs[i] = f(rd)
	}
	return spreadOf(xs)
}

func cellOf(rd *runData, k cellKey, name string) *cellResult {
	if c := rd.load[k][name]; c != nil {
		return c
	}
	return &cellResult{}
}

// loadKeys are the load cells, in report order.
func loadKeys(fenced bool) []cellKey {
	var ks []cellKey
	for _, per := range []bool{false, true} {
		for _, g := range loadGoroutines {
			ks = append(ks, cellKey{fenced, per, g})
		}
	}
	return ks
}

func oursName(fenced bool) string {
	if fenced {
		return nOursFen
	}
	return nOursUnf
}

func verdict(ok bool, s spread) string {
	switch {
	case s.n == 0:
		return "**missed** (no figure)"
	case ok:
		return "met"
	}
	return "**missed**"
}

func fx(s spread) string {
	if s.n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx [%.2f–%.2f]", s.med, s.lo, s.hi)
}

func (r *report) targets(p func(string, ...any)) {
	p("| target | median [min–max] over %d runs | verdict |\n|---|---|---|\n", len(r.runs))
	for _, fenced := range []bool{false, true} {
		ours := oursName(fenced)
		fails := r.across(func(rd *runData) float64 {
			n := 0
			for _, k := range loadKeys(fenced) {
				c := cellOf(rd, k, ours)
				n += c.failed + c.failedUnlock
			}
			return float64(n)
		})
		p("| %s: 0 failed attempts or unlocks in every load cell, default options (sum over the 8 cells) | %.0f [%.0f–%.0f] | %s |\n",
			ours, fails.med, fails.lo, fails.hi, verdict(fails.med == 0, fails))
	}
	for _, fenced := range []bool{false, true} {
		thr := 0.9
		if fenced {
			thr = 0.6
		}
		worst, worstKey, all := spread{}, cellKey{}, true
		for _, k := range loadKeys(fenced) {
			s := r.goodputRatio(k, oursName(fenced), nFloorMaj)
			if s.n == 0 || s.med < thr {
				all = false
			}
			if worst.n == 0 || s.n == 0 || s.med < worst.med {
				worst, worstKey = s, k
			}
		}
		p("| %s: goodput at least %.1fx the majority floor in every load cell (worst cell: %s) | %s | %s |\n",
			oursName(fenced), thr, cellLabel(worstKey), fx(worst), verdict(all, worst))
	}
	for _, fenced := range []bool{false, true} {
		thr := 1.15
		if fenced {
			thr = 1.6
		}
		s := r.p50Ratio(cellKey{fenced, false, 1}, oursName(fenced), nFloorMaj)
		p("| %s: lock+unlock p50 within %.2fx of the majority floor (1 goroutine, %s) | %s | %s |\n",
			oursName(fenced), thr, r.setOf(fenced), fx(s), verdict(s.med <= thr, s))
	}
	r.batchedTargets(p)
	cpu := r.cpuRatio(false, func(u usage) float64 { return float64(u.client + u.nodes) })
	p("| %s: CPU per op, client + nodes, within 1.1x of the majority floor (all 8 unfenced cells together) | %s | %s |\n",
		nOursUnf, fx(cpu), verdict(cpu.med <= 1.1, cpu))
	for _, fenced := range []bool{false, true} {
		for _, sp := range []struct {
			what string
			f    func(u usage) float64
		}{
			{"nodes' script time (EVAL/EVALSHA/FCALL usec) per op", func(u usage) float64 { return u.scriptUsec }},
			{"nodes' command time (all commands) per op", func(u usage) float64 { return u.cmdUsec }},
		} {
			s := r.cpuRatio(fenced, sp.f)
			p("| %s: %s against the majority floor (no target; all 8 cells together) | %s | — |\n", oursName(fenced), sp.what, fx(s))
		}
	}
	for _, fenced := range []bool{false, true} {
		ours := oursName(fenced)
		s := r.across(func(rd *runData) float64 {
			return ratioPos(fp99(rd, faultKey{fenced, ours, 2}), fp99(rd, faultKey{fenced, nRSBest, 2}))
		})
		p("| %s: p99 with 2 of 5 paused no worse than redsync best (FailFast) | %s | %s |\n", ours, fx(s), verdict(s.med <= 1, s))
		h := r.across(func(rd *runData) float64 {
			return ratioPos(fp99(rd, faultKey{fenced, ours, 2}), fp99(rd, faultKey{fenced, ours, 0}))
		})
		p("| %s: p99 with 2 of 5 paused within 3x of its healthy p99 | %s | %s |\n", ours, fx(h), verdict(h.med <= 3, h))
	}
	for _, fenced := range []bool{false, true} {
		ours := oursName(fenced)
		a := r.across(func(rd *runData) float64 {
			o, rs := rd.contention[contKey{fenced, ours}], rd.contention[contKey{fenced, nRSBest}]
			if o == nil || rs == nil {
				return nan
			}
			return ratioF(float64(o.acquisitions), float64(rs.acquisitions))
		})
		p("| %s: contended acquisitions/s at least redsync best's | %s | %s |\n", ours, fx(a), verdict(a.med >= 1, a))
		w := r.across(func(rd *runData) float64 {
			o, rs := rd.contention[contKey{fenced, ours}], rd.contention[contKey{fenced, nRSBest}]
			if o == nil || rs == nil || o.acquisitions == 0 {
				return nan
			}
			return ratioF(float64(o.worstWait), float64(rs.worstWait))
		})
		p("| %s: contended worst wait at most 1/4 of redsync best's | %s | %s |\n", ours, fx(w), verdict(w.med <= 0.25, w))
	}
}

func cellLabel(k cellKey) string {
	return strings.TrimPrefix(strings.TrimPrefix(k.String(), "unfenced, "), "fenced, ")
}

func fp99(rd *runData, k faultKey) float64 {
	if f := rd.faults[k]; f != nil && f.n > f.failed {
		return float64(f.p99)
	}
	return 0
}

func (r *report) goodputRatio(k cellKey, a, b string) spread {
	return r.across(func(rd *runData) float64 {
		if rd.load[k] == nil {
			return nan
		}
		return ratioF(cellOf(rd, k, a).goodput(), cellOf(rd, k, b).goodput())
	})
}

func (r *report) p50Ratio(k cellKey, a, b string) spread {
	return r.across(func(rd *runData) float64 {
		return ratioPos(float64(pct(cellOf(rd, k, a).lat, 0.5)), float64(pct(cellOf(rd, k, b).lat, 0.5)))
	})
}

// cpuRatio is ours over the majority floor of f per successful op, over
// every cell of one kind together.
func (r *report) cpuRatio(fenced bool, f func(usage) float64) spread {
	return r.across(func(rd *runData) float64 {
		per := func(name string) float64 {
			var sum float64
			ok := 0
			for _, k := range loadKeys(fenced) {
				c := cellOf(rd, k, name)
				sum += f(c.use)
				ok += c.ok
			}
			if ok == 0 {
				return 0
			}
			return sum / float64(ok)
		}
		return ratioPos(per(oursName(fenced)), per(nFloorMaj))
	})
}

// batchedTargets are issue 33's: goodput against the batched floor at 64
// and 256 goroutines on a shared client, and the fenced p50 at 256.
func (r *report) batchedTargets(p func(string, ...any)) {
	for _, fenced := range []bool{false, true} {
		thr := 0.5
		if fenced {
			thr = 0.3
		}
		for _, g := range []int{64, 256} {
			k := cellKey{fenced, false, g}
			s := r.goodputRatio(k, oursName(fenced), nFloorBat)
			p("| %s: goodput at least %.1fx the batched floor (%s) | %s | %s |\n",
				oursName(fenced), thr, cellLabel(k), fx(s), verdict(s.med >= thr, s))
		}
	}
	k := cellKey{true, false, 256}
	s := r.across(func(rd *runData) float64 { return float64(pct(cellOf(rd, k, nOursFen).lat, 0.5)) / 1e6 })
	ok := s.n > 0 && s.med < 100
	p("| %s: p50 below 100 ms (%s) | %.0f ms [%.0f–%.0f] | %s |\n", nOursFen, cellLabel(k), s.med, s.lo, s.hi, verdict(ok, s))
}
