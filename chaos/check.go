package chaos

import (
	"fmt"
	"slices"
	"time"
)

// Violation is one thing a checker found, with the evidence.
type Violation struct {
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

// Checks that Check runs. Each can fail; see check_test.go.
const (
	CheckStoreOrder = "store-order" // the store accepted a lower token after a higher one
	CheckDuplicates = "dup-tokens"  // two acquisitions got the same token
	CheckRealTime   = "token-order" // a later acquisition got a smaller token
	CheckLostWrites = "lost-writes" // acknowledged writes missing from the final value
	CheckOverlap    = "overlap"     // two holders' critical sections overlapped
	CheckLease      = "lease"       // two holders' leases overlapped: mutual exclusion broken
	CheckStaleRead  = "stale-read"  // a fenced reader's read accepted after a newer writer's write
	CheckPermits    = "permits"     // more than K permits' leases at once

	// CheckStaleRefused names the evidence of the fence at work, not a
	// violation: an operation the store refused, and the token it held.
	CheckStaleRefused = "stale-refused"
)

// Findings is every checker's result over one history.
type Findings struct {
	Overlaps      int // critical sections (grant to last store operation) that intersect
	LeaseOverlaps int // leases (grant to validity end or release) that intersect
	Overruns      int // holders still working after their validity ended
	StaleRejected int // store operations refused as stale
	StaleAccepted int // writes accepted out of order
	Duplicates    int
	TokenOrder    int
	LostWrites    int
	StaleReads    int         // the lock family's: fenced reads accepted after a newer write (CheckStaleRead)
	OverPermits   int         // the lock family's: moments more than K permits' leases overlapped
	ObserverOrder int         // the election's: observers told of a lower term after a higher one
	Violations    []Violation // evidence, a few per check
	// Refusals shows what the fence refused (CheckStaleRefused), a few of
	// them: what StaleRejected counts, and no violation.
	Refusals []Violation
}

const evidencePerCheck = 5

// Check runs every checker over h.
func Check(h *History) Findings {
	var f Findings
	add := f.addViolation
	for _, x := range h.Holds {
		for _, op := range []*Op{x.Read, x.Write} {
			if op != nil && !op.Accepted && op.Err != "" {
				f.StaleRejected++
			}
		}
	}
	f.Refusals = refusals(h)
	f.StaleAccepted = checkStoreOrder(h, add)
	f.Duplicates, f.TokenOrder = checkTokens(h, add)
	f.LostWrites = checkLost(h, add)
	f.Overlaps = checkOverlap(h, add)
	f.LeaseOverlaps = checkLease(h, add)
	for _, x := range h.Holds {
		if x.End > x.Until {
			f.Overruns++
		}
	}
	return f
}

// addViolation records a violation of check, up to evidencePerCheck each.
func (f *Findings) addViolation(check, format string, args ...any) {
	n := 0
	for _, v := range f.Violations {
		if v.Check == check {
			n++
		}
	}
	if n < evidencePerCheck {
		f.Violations = append(f.Violations, Violation{check, fmt.Sprintf(format, args...)})
	}
}

// rank orders holders: by token when fenced, by grant time otherwise.
func rank(h *History) map[*Hold]float64 {
	r := make(map[*Hold]float64, len(h.Holds))
	for i := range h.Holds {
		x := &h.Holds[i]
		if h.Fenced {
			r[x] = float64(x.Token)
		} else {
			r[x] = float64(x.Grant)
		}
	}
	return r
}

// checkStoreOrder: a write from an older holder accepted after a newer
// holder's write had returned is a stale write that got through.
func checkStoreOrder(h *History, add func(string, string, ...any)) int {
	r := rank(h)
	var writes []*Hold
	for i := range h.Holds {
		if w := h.Holds[i].Write; w != nil && w.Accepted {
			writes = append(writes, &h.Holds[i])
		}
	}
	slices.SortFunc(writes, func(a, b *Hold) int { return cmpDur(a.Write.Start, b.Write.Start) })
	byEnd := slices.Clone(writes)
	slices.SortFunc(byEnd, func(a, b *Hold) int { return cmpDur(a.Write.End, b.Write.End) })
	count := 0
	var newest *Hold
	j := 0
	for _, y := range writes {
		for j < len(byEnd) && byEnd[j].Write.End < y.Write.Start {
			if newest == nil || r[byEnd[j]] > r[newest] {
				newest = byEnd[j]
			}
			j++
		}
		if newest != nil && r[y] < r[newest] {
			count++
			add(CheckStoreOrder, "worker %d's write (token %d, granted at %v) accepted at %v after worker %d's write (token %d, granted at %v) had returned at %v",
				y.Worker, y.Token, y.Grant, y.Write.Start, newest.Worker, newest.Token, newest.Grant, newest.Write.End)
		}
	}
	return count
}

// checkTokens: uniqueness, and real-time order (an acquisition that
// returned before another was invoked has the smaller token).
func checkTokens(h *History, add func(string, string, ...any)) (dups, order int) {
	if !h.Fenced {
		return 0, 0
	}
	seen := map[uint64]*Hold{}
	for i := range h.Holds {
		x := &h.Holds[i]
		if y, ok := seen[x.Token]; ok {
			dups++
			add(CheckDuplicates, "token %d granted to worker %d at %v and to worker %d at %v", x.Token, y.Worker, y.Grant, x.Worker, x.Grant)
		}
		seen[x.Token] = x
	}
	byInvoke := make([]*Hold, len(h.Holds))
	for i := range h.Holds {
		byInvoke[i] = &h.Holds[i]
	}
	slices.SortFunc(byInvoke, func(a, b *Hold) int { return cmpDur(a.Invoke, b.Invoke) })
	byGrant := slices.Clone(byInvoke)
	slices.SortFunc(byGrant, func(a, b *Hold) int { return cmpDur(a.Grant, b.Grant) })
	// A read-write lock's readers are ordered only after writers: top is
	// the largest token granted so far, topWriter the largest writer's.
	var top, topWriter *Hold
	j := 0
	for _, b := range byInvoke {
		for j < len(byGrant) && byGrant[j].Grant < b.Invoke {
			if g := byGrant[j]; top == nil || g.Token > top.Token {
				top = g
			}
			if g := byGrant[j]; !g.Reader && (topWriter == nil || g.Token > topWriter.Token) {
				topWriter = g
			}
			j++
		}
		if b.Reader {
			if w := topWriter; w != nil && b.Token <= w.Token {
				order++
				add(CheckRealTime, "reader (worker %d) invoked at %v and got token %d, but writer (worker %d) had already got %d at %v",
					b.Worker, b.Invoke, b.Token, w.Worker, w.Token, w.Grant)
			}
			continue
		}
		if top != nil && b.Token <= top.Token && b != top {
			order++
			add(CheckRealTime, "worker %d invoked at %v and got token %d, but worker %d had already got %d at %v",
				b.Worker, b.Invoke, b.Token, top.Worker, top.Token, top.Grant)
		}
	}
	return dups, order
}

// checkLost: every acknowledged write added one to the counter, so the
// final value must equal the number of acknowledged writes.
func checkLost(h *History, add func(string, string, ...any)) int {
	lost := h.Acked - int(h.Final)
	if lost <= 0 {
		return 0
	}
	written := map[int64][]*Hold{}
	for i := range h.Holds {
		if w := h.Holds[i].Write; w != nil && w.Accepted {
			written[w.Value] = append(written[w.Value], &h.Holds[i])
		}
	}
	for v, ws := range written {
		if len(ws) > 1 {
			add(CheckLostWrites, "value %d written by %d holders (workers %d and %d at %v and %v): one update overwrote the other",
				v, len(ws), ws[0].Worker, ws[1].Worker, ws[0].Write.End, ws[1].Write.End)
		}
	}
	add(CheckLostWrites, "%d writes acknowledged, counter ends at %d", h.Acked, h.Final)
	return lost
}

// checkOverlap: critical sections [grant, last store operation] of two
// holders must not intersect.
func checkOverlap(h *History, add func(string, string, ...any)) int {
	return intersections(h, func(x *Hold) time.Duration { return x.End }, func(a, b *Hold) {
		add(CheckOverlap, "worker %d held [%v, %v] (token %d) while worker %d was granted at %v (token %d)",
			a.Worker, a.Grant, a.End, a.Token, b.Worker, b.Grant, b.Token)
	})
}

// checkLease: the leases, from grant to the end of validity or the
// release, whichever comes first, must not intersect. This is what RedLock
// promises; a holder that overruns its validity (a client pause) breaks
// only checkOverlap.
func checkLease(h *History, add func(string, string, ...any)) int {
	end := func(x *Hold) time.Duration { return min(x.End, x.Until) }
	return intersections(h, end, func(a, b *Hold) {
		add(CheckLease, "worker %d's lease [%v, %v] (token %d) overlaps worker %d's, granted at %v (token %d)",
			a.Worker, a.Grant, end(a), a.Token, b.Worker, b.Grant, b.Token)
	})
}

// intersections counts the pairs of holds whose [Grant, end] intervals
// intersect, reporting each.
func intersections(h *History, end func(*Hold) time.Duration, report func(a, b *Hold)) int {
	xs := make([]*Hold, len(h.Holds))
	for i := range h.Holds {
		xs[i] = &h.Holds[i]
	}
	slices.SortFunc(xs, func(a, b *Hold) int { return cmpDur(a.Grant, b.Grant) })
	n := 0
	for i, a := range xs {
		for _, b := range xs[i+1:] {
			if b.Grant >= end(a) {
				break
			}
			if a.Reader && b.Reader {
				continue // a read-write lock's readers share it
			}
			n++
			report(a, b)
		}
	}
	return n
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
