package familymodel

import (
	"errors"
	"hash/maphash"
	"time"

	"github.com/quorumlock/redlock/internal/hashset"
)

// Result of a search.
type Result struct {
	Rules       string
	States      int  // distinct states reached, the initial one included
	Transitions int  // events applied
	Depth       int  // events on the longest of the shortest paths to a state
	Complete    bool // every reachable state was explored
	Violation   *Violation
	Trace       []string // a shortest path to the violation, an event a line
	Elapsed     time.Duration
}

// ErrTooManyStates: the search reached Config.MaxStates.
var ErrTooManyStates = errors.New("familymodel: too many states")

type parent struct {
	from int32
	ev   Event
}

// hashed is a state's 128-bit hash (two independent 64-bit ones).
type hasher [2]maphash.Seed

func newHasher() hasher { return hasher{maphash.MakeSeed(), maphash.MakeSeed()} }

func (h hasher) sum(s *State) (uint64, uint64) {
	return maphash.Comparable(h[0], *s), maphash.Comparable(h[1], *s)
}

// Explore searches every interleaving of the events cfg allows under rules
// and returns at the first violation, with its trace, or once the bounded
// space is exhausted: breadth first (a shortest trace), or depth first if
// dfs (far less memory: the visited set and the current path only).
func Explore(cfg Config, rules Rules, dfs bool) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if dfs {
		return exploreDFS(cfg, rules)
	}
	began := time.Now()
	res := &Result{Rules: rules.Name, Complete: true}
	h, visited := newHasher(), hashset.New()
	init := initial(&cfg)
	visited.Add(h.sum(&init))
	parents := []parent{{from: -1}}
	frontier, next := []State{init}, []State(nil)
	idx, nextIdx := []int32{0}, []int32(nil)
	var evs []Event
	finish := func(err error) (*Result, error) {
		res.States, res.Elapsed = visited.Len(), time.Since(began)
		return res, err
	}
	for depth := 0; len(frontier) > 0; depth++ {
		res.Depth = depth
		next, nextIdx = next[:0], nextIdx[:0]
		for k := range frontier {
			evs = sys{&frontier[k], &cfg, &rules}.Enabled(evs[:0])
			for _, e := range evs {
				st := frontier[k]
				v := sys{&st, &cfg, &rules}.Apply(e)
				res.Transitions++
				if v != nil {
					parents = append(parents, parent{idx[k], e})
					res.Violation, res.Complete, res.Depth = v, false, depth+1
					res.Trace = trace(cfg, rules, path(parents, int32(len(parents)-1)))
					return finish(nil)
				}
				if !visited.Add(h.sum(&st)) {
					continue
				}
				parents = append(parents, parent{idx[k], e})
				next, nextIdx = append(next, st), append(nextIdx, int32(len(parents)-1))
				if cfg.MaxStates > 0 && visited.Len() >= cfg.MaxStates {
					res.Complete = false
					return finish(ErrTooManyStates)
				}
			}
		}
		frontier, next = next, frontier
		idx, nextIdx = nextIdx, idx
	}
	return finish(nil)
}

// exploreDFS is the depth-first search.
func exploreDFS(cfg Config, rules Rules) (*Result, error) {
	began := time.Now()
	res := &Result{Rules: rules.Name, Complete: true}
	h, visited := newHasher(), hashset.New()
	type frame struct {
		s   State
		evs []Event
		ev  Event // the event that led here
	}
	init := initial(&cfg)
	visited.Add(h.sum(&init))
	stack := []frame{{s: init, evs: sys{&init, &cfg, &rules}.Enabled(nil)}}
	finish := func(err error) (*Result, error) {
		res.States, res.Elapsed = visited.Len(), time.Since(began)
		return res, err
	}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if len(top.evs) == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		e := top.evs[len(top.evs)-1]
		top.evs = top.evs[:len(top.evs)-1]
		st := top.s
		v := sys{&st, &cfg, &rules}.Apply(e)
		res.Transitions++
		if v != nil {
			var evs []Event
			for _, f := range stack[1:] {
				evs = append(evs, f.ev)
			}
			res.Violation, res.Complete = v, false
			res.Trace = trace(cfg, rules, append(evs, e))
			return finish(nil)
		}
		if !visited.Add(h.sum(&st)) {
			continue
		}
		res.Depth = max(res.Depth, len(stack))
		stack = append(stack, frame{s: st, evs: sys{&st, &cfg, &rules}.Enabled(nil), ev: e})
		if cfg.MaxStates > 0 && visited.Len() >= cfg.MaxStates {
			res.Complete = false
			return finish(ErrTooManyStates)
		}
	}
	return finish(nil)
}

func path(parents []parent, at int32) []Event {
	var evs []Event
	for ; at > 0; at = parents[at].from {
		evs = append(evs, parents[at].ev)
	}
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	return evs
}

// trace replays path from the initial state, a line per
// event with the clock and what the event left.
func trace(cfg Config, rules Rules, path []Event) []string {
	s := initial(&cfg)
	lines := make([]string, 0, len(path))
	for _, e := range path {
		sys{&s, &cfg, &rules}.Apply(e)
		lines = append(lines, describe(&cfg, &s, e))
	}
	return lines
}
