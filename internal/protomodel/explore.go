package protomodel

import (
	"errors"
	"hash/maphash"
	"time"

	"github.com/quorumlock/redlock/internal/hashset"
)

// The search: breadth first over every interleaving of the enabled events
// (less the exact reductions of Enabled), so that the first violation found
// has a shortest trace. A state is identified by a 128-bit hash of its
// canonical encoding (hash compaction: two independent 64-bit hashes). A
// collision would prune a state wrongly; its probability is about
// n^2/2^129 for n states, below 1e-20 for 10^9 states.

// Result of a search.
type Result struct {
	Rules       string
	States      int   // distinct states reached, the initial one included
	Transitions int   // events applied
	Depth       int   // events on the longest of the shortest paths to a state
	Complete    bool  // every reachable state was explored (no violation, MaxDepth or MaxStates stopped it)
	Levels      []int // new states found at each depth
	Violation   *Violation
	Events      []Event  // a shortest path to the violation
	Trace       []string // its events, readable
	Elapsed     time.Duration
}

// ErrTooManyStates: the search reached Config.MaxStates.
var ErrTooManyStates = errors.New("protomodel: too many states")

type parentRec struct {
	parent int32
	ev     Event
}

type queued struct {
	s   State
	idx int32 // its parentRec
}

// Explore searches every interleaving allowed by cfg under rules and
// returns at the first violation, or once the bounded space is exhausted:
// breadth first, or depth first if cfg.DFS.
func Explore(cfg Config, rules Rules) (*Result, error) {
	if cfg.Clients > MaxClients || cfg.Repairers > MaxRepairers || cfg.Clients*cfg.Attempts > MaxTokens || cfg.Attempts > 15 ||
		cfg.Extends > MaxExtends || cfg.Reprovisions > MaxReprovisions {
		return nil, errors.New("protomodel: config exceeds the model's fixed sizes")
	}
	if cfg.ShortTTL < 0 || cfg.ShortTTL >= cfg.TTL && cfg.ShortTTL != 0 {
		return nil, errors.New("protomodel: ShortTTL must be below TTL (the longest TTL in use, which repairs wait out)")
	}
	if cfg.DFS {
		return exploreDFS(cfg, rules)
	}
	began := time.Now()
	res := &Result{Rules: rules.Name, Complete: true}
	seeds := [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	visited := hashset.New()
	parents := []parentRec{{parent: -1}}
	var buf []byte
	var sc scratch
	key := func(s sys) (uint64, uint64) {
		buf = s.encode(buf[:0], &sc)
		return maphash.Bytes(seeds[0], buf), maphash.Bytes(seeds[1], buf)
	}
	init := Initial(&cfg)
	visited.Add(key(sys{&init, &cfg, &rules}))
	frontier := []queued{{s: init, idx: 0}}
	var next []queued
	var evs []Event
	finish := func(err error) (*Result, error) {
		res.States, res.Elapsed = visited.Len(), time.Since(began)
		return res, err
	}
	for depth := 0; len(frontier) > 0; depth++ {
		if cfg.MaxDepth > 0 && depth >= cfg.MaxDepth {
			res.Complete = false
			break
		}
		res.Depth = depth
		next = next[:0]
		for i := range frontier {
			q := &frontier[i]
			evs = sys{&q.s, &cfg, &rules}.Enabled(evs[:0])
			for _, e := range evs {
				st := q.s
				s := sys{&st, &cfg, &rules}
				v := s.check(s.Apply(e, nil))
				res.Transitions++
				if v != nil {
					parents = append(parents, parentRec{q.idx, e})
					res.Violation, res.Complete = v, false
					res.Events = path(parents, int32(len(parents)-1))
					res.Trace = Replay(cfg, rules, res.Events)
					res.Depth = depth + 1
					return finish(nil)
				}
				if !visited.Add(key(s)) {
					continue
				}
				parents = append(parents, parentRec{q.idx, e})
				next = append(next, queued{s: st, idx: int32(len(parents) - 1)})
				if cfg.MaxStates > 0 && visited.Len() >= cfg.MaxStates {
					res.Complete = false
					return finish(ErrTooManyStates)
				}
			}
		}
		res.Levels = append(res.Levels, len(next))
		frontier, next = next, frontier
	}
	return finish(nil)
}

// exploreDFS is the depth-first search: it holds only the visited set and
// the current path, so it reaches much larger spaces than the
// breadth-first one, but the trace of a violation it finds is not a
// shortest one.
func exploreDFS(cfg Config, rules Rules) (*Result, error) {
	began := time.Now()
	res := &Result{Rules: rules.Name, Complete: true}
	seeds := [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	visited := hashset.New()
	var buf []byte
	var sc scratch
	key := func(s sys) (uint64, uint64) {
		buf = s.encode(buf[:0], &sc)
		return maphash.Bytes(seeds[0], buf), maphash.Bytes(seeds[1], buf)
	}
	type frame struct {
		s    State
		evs  []Event
		next int
	}
	var stack []frame
	push := func(s State) {
		if len(stack) < cap(stack) {
			stack = stack[:len(stack)+1]
		} else {
			stack = append(stack, frame{})
		}
		f := &stack[len(stack)-1]
		f.s, f.next = s, 0
		f.evs = sys{&f.s, &cfg, &rules}.Enabled(f.evs[:0])
		res.Depth = max(res.Depth, len(stack)-1)
	}
	init := Initial(&cfg)
	visited.Add(key(sys{&init, &cfg, &rules}))
	push(init)
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next == len(f.evs) || cfg.MaxDepth > 0 && len(stack) > cfg.MaxDepth {
			if f.next < len(f.evs) {
				res.Complete = false
			}
			stack = stack[:len(stack)-1]
			continue
		}
		e := f.evs[f.next]
		f.next++
		st := f.s
		s := sys{&st, &cfg, &rules}
		v := s.check(s.Apply(e, nil))
		res.Transitions++
		if v != nil {
			for _, g := range stack {
				res.Events = append(res.Events, g.evs[g.next-1])
			}
			res.Violation, res.Complete = v, false
			res.Trace = Replay(cfg, rules, res.Events)
			break
		}
		if !visited.Add(key(s)) {
			continue
		}
		if cfg.MaxStates > 0 && visited.Len() >= cfg.MaxStates {
			res.Complete = false
			res.States, res.Elapsed = visited.Len(), time.Since(began)
			return res, ErrTooManyStates
		}
		push(st)
	}
	res.States, res.Elapsed = visited.Len(), time.Since(began)
	return res, nil
}
