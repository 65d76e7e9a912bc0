package chaos

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// CheckFamily runs the checkers over a lock family's history: every
// resource's holds are judged as the mutex's one are (Check: store order,
// tokens, lost writes, overlaps and leases, with a read-write lock's
// readers sharing), then the checks only the family has: fenced reads
// accepted after a newer write (CheckStaleRead), and a semaphore's leases
// never more than K at once (CheckPermits).
func CheckFamily(h *History) Findings {
	byResource := map[string][]Hold{}
	for _, x := range h.Holds {
		byResource[x.Resource] = append(byResource[x.Resource], x)
	}
	var f Findings
	// A multi-lock records one hold per member, so one overlap of two
	// multi-locks is found on each member they share: list it once,
	// naming the members.
	type finding struct{ check, detail string }
	var order []finding
	where := map[finding][]string{}
	for _, r := range slices.Sorted(maps.Keys(byResource)) {
		sub := &History{Scenario: h.Scenario, Fenced: h.Fenced, TTL: h.TTL, Length: h.Length,
			Holds: byResource[r], Final: h.Finals[r]}
		for _, x := range sub.Holds {
			if x.Write != nil && x.Write.Accepted {
				sub.Acked++
			}
		}
		g := Check(sub)
		g.StaleReads = checkStaleReads(sub, g.addViolation)
		for _, v := range g.Violations {
			k := finding{v.Check, v.Detail}
			if where[k] == nil {
				order = append(order, k)
			}
			where[k] = append(where[k], r)
		}
		g.Violations = nil
		f.merge(g)
	}
	for _, k := range order {
		if rs := where[k]; len(rs) == 1 && rs[0] == "" {
			f.addViolation(k.check, "%s", k.detail)
		} else {
			f.addViolation(k.check, "on %s: %s", strings.Join(rs, ", "), k.detail)
		}
	}
	if h.Permits > 0 {
		f.OverPermits = checkPermits(h, f.addViolation)
	}
	f.ObserverOrder = checkObservers(h, f.addViolation)
	return f
}

// merge adds g's counts and evidence to f.
func (f *Findings) merge(g Findings) {
	f.Overlaps += g.Overlaps
	f.LeaseOverlaps += g.LeaseOverlaps
	f.Overruns += g.Overruns
	f.StaleRejected += g.StaleRejected
	f.StaleAccepted += g.StaleAccepted
	f.Duplicates += g.Duplicates
	f.TokenOrder += g.TokenOrder
	f.LostWrites += g.LostWrites
	f.StaleReads += g.StaleReads
	f.OverPermits += g.OverPermits
	f.ObserverOrder += g.ObserverOrder
	for _, v := range g.Violations {
		f.addViolation(v.Check, "%s", v.Detail)
	}
	for _, v := range g.Refusals {
		if len(f.Refusals) < evidencePerCheck {
			f.Refusals = append(f.Refusals, v)
		}
	}
}

// checkStaleReads: a reader's read the store accepted after a writer with
// a larger rank (token, or grant time without fencing) had written: the
// reader saw data from before a write that came after it. With fencing
// the read mark refuses it; without, the client-pause case shows it.
func checkStaleReads(h *History, add func(string, string, ...any)) int {
	r := rank(h)
	n := 0
	for i := range h.Holds {
		x := &h.Holds[i]
		if !x.Reader || x.Read == nil || !x.Read.Accepted {
			continue
		}
		for j := range h.Holds {
			y := &h.Holds[j]
			if y.Reader || y.Write == nil || !y.Write.Accepted || y.Write.End >= x.Read.Start || r[y] <= r[x] {
				continue
			}
			n++
			add(CheckStaleRead, "worker %d's read (token %d) accepted at %v after worker %d's write (token %d) had returned at %v",
				x.Worker, x.Token, x.Read.Start, y.Worker, y.Token, y.Write.End)
			break
		}
	}
	return n
}

// checkPermits counts the moments more than h.Permits leases, from grant
// to the end of validity or the release, were held at once.
func checkPermits(h *History, add func(string, string, ...any)) int {
	type edge struct {
		at   time.Duration
		step int
		x    *Hold
	}
	var edges []edge
	for i := range h.Holds {
		x := &h.Holds[i]
		edges = append(edges, edge{x.Grant, 1, x}, edge{min(x.End, x.Until), -1, x})
	}
	// Ends before starts at the same instant: a lease that ends as another
	// begins does not overlap it.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := cmpDur(a.at, b.at); c != 0 {
			return c
		}
		return a.step - b.step
	})
	n, held := 0, 0
	for _, e := range edges {
		held += e.step
		if e.step > 0 && held > h.Permits {
			n++
			add(CheckPermits, "%d leases held at %v, more than the %d permits (worker %d took %s, token %d)",
				held, e.at, h.Permits, e.x.Worker, e.x.Resource, e.x.Token)
		}
	}
	return n
}
