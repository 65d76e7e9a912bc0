package protomodel

import (
	"fmt"
	"strings"
)

// Traces: the events of a path, replayed with a line per step, and made
// shorter.

// path is the events from the initial state to parents[i].
func path(parents []parentRec, i int32) []Event {
	var evs []Event
	for ; parents[i].parent >= 0; i = parents[i].parent {
		evs = append(evs, parents[i].ev)
	}
	for l, r := 0, len(evs)-1; l < r; l, r = l+1, r-1 {
		evs[l], evs[r] = evs[r], evs[l]
	}
	return evs
}

// Replay runs evs from the initial state and returns a line per event
// (what a decision received, what it decided, and what failing did are
// one event), and the violation, if any, where it happens.
func Replay(cfg Config, rules Rules, evs []Event) []string {
	var out, log []string
	st := Initial(&cfg)
	s := sys{&st, &cfg, &rules}
	for i, e := range evs {
		log = log[:0]
		v := s.check(s.Apply(e, &log))
		line := fmt.Sprintf("%2d. ", i+1)
		for k, l := range log {
			if k > 0 {
				_, l, _ = strings.Cut(l, " ") // its time is the first's
				line += "; "
			}
			line += l
		}
		out = append(out, line)
		if v != nil {
			out = append(out, "VIOLATION "+v.String())
		}
	}
	return out
}

// run replays evs, each of which must be enabled (in the full, unreduced
// semantics) where it comes, and returns the first violation and the
// number of events up to it; nil if an event is not enabled or nothing is
// violated.
func run(cfg Config, rules Rules, evs []Event) (*Violation, int) {
	st := Initial(&cfg)
	s := sys{&st, &cfg, &rules}
	var enabled []Event
	for i, e := range evs {
		enabled = s.enabled(enabled[:0])
		ok := false
		for _, f := range enabled {
			ok = ok || f == e
		}
		if !ok {
			return nil, 0
		}
		if v := s.check(s.Apply(e, nil)); v != nil {
			return v, i + 1
		}
	}
	return nil, 0
}

// Minimize returns a shortest-it-can-find subsequence of evs that still
// violates the property evs violates: it removes runs of events, longest
// first, while the rest still replays to that violation (ddmin). The result
// is 1-minimal (no single event can be removed), not necessarily a
// shortest trace overall: the breadth-first search gives those.
func Minimize(cfg Config, rules Rules, evs []Event) ([]Event, error) {
	v, n := run(cfg, rules, evs)
	if v == nil {
		return nil, fmt.Errorf("protomodel: the events do not replay to a violation")
	}
	prop := v.Prop
	evs = append([]Event(nil), evs[:n]...)
	for size := len(evs) / 2; size >= 1; {
		removed := false
		for i := 0; i+size <= len(evs); {
			try := append(append([]Event(nil), evs[:i]...), evs[i+size:]...)
			if v, n := run(cfg, rules, try); v != nil && v.Prop == prop {
				evs, removed = try[:n], true
				continue
			}
			i++
		}
		if size > 1 {
			size /= 2
		} else if !removed {
			break
		}
	}
	return evs, nil
}
