package waitmodel

import (
	"fmt"
	"strings"
)

// Result is what Check found.
type Result struct {
	States int
	// Stuck, if not empty, is a trace to a state from which the waiters
	// that do not take turns can no longer all finish.
	Stuck []string
	// Starved, if not empty, is a trace to a cycle of events (after "--
	// cycle --") in which Target has waited its TTL, attempts, and never
	// gets its set while the names change hands.
	Starved []string
}

type edge struct {
	e  Event
	to int
}

type graph struct {
	c      *Config
	states []state
	index  map[state]int
	out    [][]edge
	parent []edge // how BFS first reached each state (to -1: the start)
}

func explore(c *Config) *graph {
	g := &graph{c: c, index: map[state]int{}}
	add := func(s state, from edge) int {
		if i, ok := g.index[s]; ok {
			return i
		}
		i := len(g.states)
		g.index[s] = i
		g.states = append(g.states, s)
		g.out = append(g.out, nil)
		g.parent = append(g.parent, from)
		return i
	}
	add(c.initial(), edge{to: -1})
	for i := 0; i < len(g.states); i++ {
		c.step(g.states[i], func(e Event, t state) {
			j := add(t, edge{e, i})
			g.out[i] = append(g.out[i], edge{e, j})
		})
	}
	return g
}

// trace is the events from the start to state i.
func (g *graph) trace(i int) []string {
	var rev []string
	for p := g.parent[i]; p.to >= 0; p = g.parent[i] {
		rev = append(rev, g.c.describe(p.e))
		i = p.to
	}
	out := make([]string, 0, len(rev))
	for k := len(rev) - 1; k >= 0; k-- {
		out = append(out, rev[k])
	}
	return out
}

// finished: every actor that does not take turns is done.
func (g *graph) finished(s state) bool {
	for i, a := range g.c.Actors {
		if !a.Turns && s.status[i] != done {
			return false
		}
	}
	return true
}

// Check explores every state of c reachable from its start, and looks for
// a stuck state and, if target is a waiter's index (else -1), a cycle that
// starves it.
func Check(c Config, target int) (Result, error) {
	if err := c.validate(); err != nil {
		return Result{}, err
	}
	g := explore(&c)
	r := Result{States: len(g.states)}
	// Stuck: not every state can reach a finished one.
	in := make([][]int, len(g.states))
	for i, es := range g.out {
		for _, e := range es {
			in[e.to] = append(in[e.to], i)
		}
	}
	can := make([]bool, len(g.states))
	var queue []int
	for i, s := range g.states {
		if g.finished(s) {
			can[i] = true
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, j := range in[i] {
			if !can[j] {
				can[j] = true
				queue = append(queue, j)
			}
		}
	}
	for i := range g.states {
		if !can[i] {
			r.Stuck = append(g.trace(i), "-- from here no schedule lets every waiter finish --", g.describeState(i))
			break
		}
	}
	if target >= 0 {
		r.Starved = g.starved(target)
	}
	return r, nil
}

// starved finds a strongly connected set of states, in each of which
// target waits having waited its TTL, whose internal edges include one of
// target's attempts and a release: an adversary can schedule that cycle
// for ever, target trying all along and never getting its set.
func (g *graph) starved(target int) []string {
	in := func(i int) bool {
		s := g.states[i]
		return s.status[target] == waiting && s.patient[target]
	}
	comp := g.sccs(in)
	fair := map[int]bool{}
	for i := range g.states {
		if !in(i) {
			continue
		}
		if _, ok := fair[comp[i]]; !ok {
			fair[comp[i]] = g.fair(comp, comp[i])
		}
		if !fair[comp[i]] {
			continue
		}
		for _, e := range g.out[i] {
			if !in(e.to) || comp[e.to] != comp[i] || e.e.Kind != Attempt || e.e.Actor != target {
				continue
			}
			if cycle := g.cycleWithRelease(i, e, comp); cycle != nil {
				return append(append(g.trace(i), "-- cycle --"), cycle...)
			}
		}
	}
	return nil
}

// fair reports whether a run can stay in component k for ever with every
// actor treated fairly (weak fairness): an actor whose release or attempt
// changes the state in every state of k must take it within k. A waiter
// woken by its promise attempts; a holder releases in the end (its TTL);
// an adversary cannot withhold either for ever. Without it, a Lock waiter
// promised a name and never scheduled would starve everyone behind it,
// which the promise's lapse (a promise period) also prevents.
func (g *graph) fair(comp []int, k int) bool {
	for actor := range g.c.Actors {
		alwaysEnabled, taken := true, false
		for i := range g.states {
			if comp[i] != k {
				continue
			}
			enabled := false
			for _, e := range g.out[i] {
				if e.e.Actor != actor || e.e.Kind == Patience || e.to == i {
					continue
				}
				enabled = true
				if comp[e.to] == k {
					taken = true
				}
			}
			if !enabled {
				alwaysEnabled = false
			}
		}
		if alwaysEnabled && !taken {
			return false
		}
	}
	return true
}

// cycleWithRelease returns the events of a closed walk from i within its
// component that starts with attempt and contains a release, or nil.
func (g *graph) cycleWithRelease(i int, attempt edge, comp []int) []string {
	hasRelease := false
	for j := range g.states {
		if comp[j] != comp[i] {
			continue
		}
		for _, e := range g.out[j] {
			if comp[e.to] == comp[i] && e.e.Kind == Release {
				hasRelease = true
			}
		}
	}
	if !hasRelease {
		return nil
	}
	// A walk: BFS within the component from i to every state; the
	// component is strongly connected, so i -> (release edge) -> i exists.
	path := func(from, to int) []Event {
		prev := map[int]edge{from: {to: -1}}
		q := []int{from}
		for len(q) > 0 && q[0] != to {
			x := q[0]
			q = q[1:]
			for _, e := range g.out[x] {
				if comp[e.to] == comp[i] {
					if _, ok := prev[e.to]; !ok {
						prev[e.to] = edge{e.e, x}
						q = append(q, e.to)
					}
				}
			}
		}
		var rev []Event
		for x := to; prev[x].to >= 0; x = prev[x].to {
			rev = append(rev, prev[x].e)
		}
		out := make([]Event, 0, len(rev))
		for k := len(rev) - 1; k >= 0; k-- {
			out = append(out, rev[k])
		}
		return out
	}
	var walk []Event
	for j := range g.states {
		if comp[j] != comp[i] {
			continue
		}
		for _, e := range g.out[j] {
			if comp[e.to] == comp[i] && e.e.Kind == Release {
				walk = append([]Event{attempt.e}, path(attempt.to, j)...)
				walk = append(append(walk, e.e), path(e.to, i)...)
				goto found
			}
		}
	}
found:
	var out []string
	for _, e := range walk {
		out = append(out, g.c.describe(e))
	}
	return out
}

// sccs labels the states for which keep holds with their strongly
// connected component (Tarjan's), over the edges between such states;
// the others get -1.
func (g *graph) sccs(keep func(int) bool) []int {
	n := len(g.states)
	index, low, comp := make([]int, n), make([]int, n), make([]int, n)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	onStack := make([]bool, n)
	var stack []int
	next, ncomp := 0, 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range g.out[v] {
			w := e.to
			if !keep(w) {
				continue
			}
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = ncomp
				if w == v {
					break
				}
			}
			ncomp++
		}
	}
	for v := range n {
		if keep(v) && index[v] < 0 {
			visit(v)
		}
	}
	return comp
}

func (g *graph) describeState(i int) string { return g.describe(g.states[i]) }

func (g *graph) describe(s state) string {
	var b strings.Builder
	for n := range g.c.Names {
		fmt.Fprintf(&b, "name %d: held by %s, promised to %s; ", n, g.who(s.holder[n]), g.who(s.promise[n]))
	}
	return strings.TrimSuffix(b.String(), "; ")
}

func (g *graph) who(i int8) string {
	if i < 0 {
		return "nobody"
	}
	return g.c.Actors[i].Name
}
