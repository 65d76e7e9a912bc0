package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quorumlock/redlock"
)

// The election workload's own records and checks: what observers saw
// (Election.Observe on clients of their own, outside the candidates'
// wires), and how long each handover took.

// Observers is how many clients watch the election workload's leaders.
const Observers = 2

// Observation is one leader an observer's channel delivered.
type Observation struct {
	Observer int
	At       time.Duration // when the channel delivered it
	Term     uint64
	Value    string
}

// CheckObserverOrder: an observer was told of a term lower than one it
// had been told of before (Observe promises only growing terms), or of a
// leader with a term other than the one its Campaign returned.
const CheckObserverOrder = "observer-order"

func (h *History) addObservation(o Observation) {
	h.mu.Lock()
	h.Observed = append(h.Observed, o)
	h.mu.Unlock()
}

// observe records what observer id's Observe channel delivers until ctx
// ends.
func (w *workload) observe(ctx context.Context, id int, c *redlock.Client) {
	e, err := c.Election("chaos")
	if err != nil {
		w.h.addError("observer: " + err.Error())
		return
	}
	for info := range e.Observe(ctx) {
		w.h.addObservation(Observation{Observer: id, At: w.now(), Term: info.Term, Value: info.Value})
	}
}

// checkObservers counts, per observer, the deliveries whose term was lower
// than one delivered to it before (which Observe's own filter should make
// impossible), and those whose term is not the token the leader it names
// got from Campaign (the term Leader reads off the nodes: a wrong or lost
// one, such as the 0 a leadership older than the retention once showed).
// Terms are tokens only with fencing.
func checkObservers(h *History, add func(string, string, ...any)) int {
	if !h.Fenced {
		return 0
	}
	terms := map[string]uint64{}
	for _, x := range h.Holds {
		terms[leaderValue(x)] = x.Token
	}
	n := 0
	highest := map[int]Observation{}
	for _, o := range h.Observed {
		if t, ok := terms[o.Value]; ok && t != o.Term {
			n++
			add(CheckObserverOrder, "observer %d was told of %q with term %d at %v; its Campaign returned term %d",
				o.Observer, o.Value, o.Term, o.At, t)
			continue
		}
		if prev, ok := highest[o.Observer]; ok && o.Term < prev.Term {
			n++
			add(CheckObserverOrder, "observer %d was told of %q (term %d) at %v, after %q (term %d) at %v",
				o.Observer, o.Value, o.Term, o.At, prev.Value, prev.Term, prev.At)
			continue
		}
		highest[o.Observer] = o
	}
	return n
}

// observedSummary says how many of the run's leaderships each observer
// saw: a leadership shorter than Observe's poll may pass unseen, so this
// is evidence, not a check.
func observedSummary(h *History) string {
	if h.Primitive != Election {
		return ""
	}
	leaders := map[string]bool{}
	for _, x := range h.Holds {
		leaders[leaderValue(x)] = true
	}
	s := fmt.Sprintf("observers: %d leaderships;", len(leaders))
	for id := range Observers {
		seen := map[string]bool{}
		for _, o := range h.Observed {
			if o.Observer == id && leaders[o.Value] {
				seen[o.Value] = true
			}
		}
		s += fmt.Sprintf(" observer %d saw %d", id, len(seen))
		if id < Observers-1 {
			s += ","
		}
	}
	if h.Fenced {
		s += "; the observer-order check reads their terms"
	}
	return s
}

// failoverSummary is the election's handovers: from a leader's release to
// the next leader's grant, and from a leader stalling (a paused client:
// the pause starts at its grant) to the next grant, which waits out the
// stalled leader's lease. Both are against the TTL.
func failoverSummary(h *History) string {
	if h.Primitive != Election || len(h.Holds) < 2 {
		return ""
	}
	holds := slices.Clone(h.Holds)
	slices.SortFunc(holds, func(a, b Hold) int { return cmpDur(a.Grant, b.Grant) })
	var resigned, stalled []time.Duration
	early := 0
	for i := 1; i < len(holds); i++ {
		prev, next := holds[i-1], holds[i]
		switch {
		case prev.Paused > 0:
			stalled = append(stalled, next.Grant-prev.Grant)
		case next.Grant < prev.End:
			early++ // a lease lost to the nodes' faults: the overlap checks judge it
		default:
			resigned = append(resigned, next.Grant-prev.End)
		}
	}
	s := "failover: after a resign " + durations(resigned, h.TTL) + "; after a leader stalled " + durations(stalled, h.TTL)
	if early > 0 {
		s += fmt.Sprintf("; %d leaders granted before the previous one's last write (a lease lost to the faults)", early)
	}
	return s
}

// leaderValue is the value the election workload's candidate campaigned
// with (runFamily).
func leaderValue(x Hold) string { return fmt.Sprintf("w%d#%d", x.Worker, x.Seq) }

// durations is n, median and max of ds, and the max as a fraction of ttl.
func durations(ds []time.Duration, ttl time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	hi := ds[len(ds)-1]
	return fmt.Sprintf("%d, median %v, max %v (%.2f of the TTL)", len(ds),
		ds[len(ds)/2].Round(time.Millisecond), hi.Round(time.Millisecond), float64(hi)/float64(ttl))
}
