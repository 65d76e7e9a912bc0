package waitmodel

import (
	"fmt"
	"strings"
)

// RWResult is what CheckRW found.
type RWResult struct {
	States int
	// Violation, if not empty, names the bound broken and is followed by
	// the events from the start that break it, and the state reached.
	Violation []string
}

// CheckRW explores every state of c reachable from its start (no lock
// held, nobody waiting) and checks docs/rwlock.md's bounds, as far as one
// node decides them, after every event:
//   - ReaderBound: a reader waits for one writer phase at most, the hold
//     in progress when it was first refused: no writer hold is granted
//     while it waits if a writer held the lock then, one at most if a
//     writer was only queued or promised it;
//   - ReaderEntry: while a writer waits in the queue, no reader is
//     granted the lock that has not waited through a writer's Unlock (it
//     would let readers that keep overlapping keep the writer out);
//   - WriterBound: a queued writer waits for the reader phase in progress
//     when it joined the queue, if there was one, and for one reader phase
//     begun since per writer ahead of it (queued or holding when it
//     joined); a reader phase begins at a writer's Unlock that admits the
//     readers waiting for its hold;
//   - WriterOrder: a queued writer waits through no more writer holds
//     than there were writers ahead of it (writers keep their arrival
//     order).
//
// The model has no time: every event may come in any order, which is
// what an adversary's schedule of live callers can do.
func CheckRW(c RWConfig) (RWResult, error) {
	if err := c.validate(); err != nil {
		return RWResult{}, err
	}
	type edge struct {
		e    RWEvent
		from int
	}
	index := map[rwState]int{}
	var states []rwState
	var parent []edge
	add := func(s rwState, from edge) int {
		if i, ok := index[s]; ok {
			return i
		}
		index[s] = len(states)
		states = append(states, s)
		parent = append(parent, from)
		return len(states) - 1
	}
	add(c.initial(), edge{from: -1})
	trace := func(i int) []string {
		var rev []string
		for ; parent[i].from >= 0; i = parent[i].from {
			rev = append(rev, parent[i].e.String())
		}
		out := make([]string, 0, len(rev))
		for k := len(rev) - 1; k >= 0; k-- {
			out = append(out, rev[k])
		}
		return out
	}
	var found []string
	for i := 0; i < len(states) && found == nil; i++ {
		c.step(states[i], func(e RWEvent, t rwState) {
			if found != nil {
				return
			}
			j := add(t, edge{e, i})
			if why := c.violation(states[i], e, t); why != "" {
				found = append(append([]string{why}, trace(j)...), "-- reached: "+c.describe(t))
			}
		})
	}
	return RWResult{States: len(states), Violation: found}, nil
}

// violation names the bound that event e, from s to t, breaks, or "".
func (c *RWConfig) violation(s rwState, e RWEvent, t rwState) string {
	if e.Reader && e.Kind == RWAttempt && t.reading[e.Actor] {
		r := e.Actor
		for w := range c.Writers {
			if s.place[w] >= 0 && s.holder != int8(w) && !(s.due[r] != notWaiting && s.ghost[r].through) {
				return fmt.Sprintf("ReaderEntry: R%d granted while W%d waits in the queue, without having waited through a writer's Unlock", r, w)
			}
		}
	}
	for r := range c.Readers {
		if t.due[r] == notWaiting || t.reading[r] {
			continue
		}
		allowed := int8(1)
		if t.ghost[r].held {
			allowed = 0
		}
		if t.ghost[r].grants > allowed {
			return fmt.Sprintf("ReaderBound: R%d waits through %d writer holds (allowed %d)", r, t.ghost[r].grants, allowed)
		}
	}
	for w := range c.Writers {
		if t.place[w] >= 0 && t.holder != int8(w) && t.phases[w] > t.ahead[w] {
			return fmt.Sprintf("WriterBound: W%d waits through %d reader phases with %d writers ahead", w, t.phases[w], t.ahead[w])
		}
		if t.place[w] >= 0 && t.holder != int8(w) && t.holds[w] > t.ahead[w] {
			return fmt.Sprintf("WriterOrder: W%d waits through %d writer holds with %d writers ahead", w, t.holds[w], t.ahead[w])
		}
	}
	return ""
}

func (c *RWConfig) describe(s rwState) string {
	var b strings.Builder
	who := func(w int8) string {
		if w < 0 {
			return "nobody"
		}
		return fmt.Sprintf("W%d", w)
	}
	fmt.Fprintf(&b, "held by %s, promised to %s; queue", who(s.holder), who(s.next))
	for p := int8(0); p < MaxWriters; p++ {
		for w := range c.Writers {
			if s.place[w] == p {
				fmt.Fprintf(&b, " W%d", w)
			}
		}
	}
	b.WriteString("; reading")
	for r := range c.Readers {
		if s.reading[r] {
			fmt.Fprintf(&b, " R%d", r)
		}
	}
	b.WriteString("; waiting to read")
	for r := range c.Readers {
		if s.due[r] != notWaiting {
			fmt.Fprintf(&b, " R%d(due %d)", r, s.due[r])
		}
	}
	return b.String()
}
