package chaos

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// illegal names the first model porcupine found violated, or "".
func illegal(models []ModelCheck) string { return firstWith(models, porcupine.Illegal) }

// undecided names the first model porcupine could not decide within its
// time limit, or "". Such a check proved nothing, and porcupine searches
// longest exactly when a history is not linearizable: it is no pass.
func undecided(models []ModelCheck) string { return firstWith(models, porcupine.Unknown) }

func firstWith(models []ModelCheck, r porcupine.CheckResult) string {
	for _, m := range models {
		if m.Result == r {
			return m.Model
		}
	}
	return ""
}

// Verdict is whether a run showed what its scenario promises.
type Verdict struct {
	OK   bool
	Text string
}

func judge(s Scenario, fenced bool, h *History, f Findings, models []ModelCheck) Verdict {
	// A holder that overran its validity was paused or starved: its late
	// write is the client-pause case even where the scenario injects none.
	overran := f.Overruns > 0 && s.Unfenced == Holds
	switch {
	case len(h.Errors) > 0:
		return Verdict{false, "ERROR: " + h.Errors[0]}
	case len(h.Holds) == 0:
		return Verdict{false, "NO OPERATIONS"}
	case f.Duplicates > 0 || f.TokenOrder > 0:
		return Verdict{false, "BUG: token order"}
	case fenced && (f.StaleAccepted > 0 || f.LostWrites > 0):
		return Verdict{false, "BUG: stale write accepted"}
	case fenced && f.StaleReads > 0:
		return Verdict{false, "BUG: stale read accepted"}
	case f.ObserverOrder > 0:
		return Verdict{false, "BUG: an observer was told of an older term"}
	case s.Unfenced == Holds && f.OverPermits > 0:
		return Verdict{false, "BUG: more holders than permits"}
	case illegal(models) != "":
		return Verdict{false, "BUG: porcupine: " + illegal(models) + " not linearizable, which the hand-written checkers missed"}
	case undecided(models) != "":
		return Verdict{false, "UNCHECKED: porcupine could not decide " + undecided(models) + " within its time limit"}
	case s.Unfenced == Holds && f.LeaseOverlaps > 0:
		return Verdict{false, "BUG: leases overlapped"}
	case !fenced && s.Unfenced == Holds && !overran && (f.Overlaps > 0 || f.StaleAccepted > 0 || f.LostWrites > 0):
		return Verdict{false, "BUG: holders overlapped"}
	case !fenced && s.Unfenced == Expected && f.Overlaps == 0:
		return Verdict{false, "NOT EXERCISED: no overlap shown"}
	case overran:
		return Verdict{true, fmt.Sprintf("ok, but %d holders overran their validity (machine too slow)", f.Overruns)}
	case fenced && f.Overlaps > 0:
		return Verdict{true, "ok: overlap, no stale write"}
	case !fenced && f.Overlaps > 0:
		return Verdict{true, "ok: overlap as expected"}
	}
	return Verdict{true, "ok"}
}
