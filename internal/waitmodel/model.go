package waitmodel

import (
	"fmt"
	"slices"
)

// Bounds of a model: small, so that a state is a comparable value.
const (
	MaxNames  = 3
	MaxActors = 8
)

// Rules selects the multi-lock's rule for a member promised to it that it
// cannot use yet.
type Rules int

const (
	// Keep is lua/multi_wait.lua's: pass it on until the multi-lock has
	// waited its TTL, then keep it unless another member of its set is
	// promised to an older waiter.
	Keep Rules = iota
	// NeverKeep always passes it on: the code before issue 34.
	NeverKeep
	// NoAge keeps it once the TTL has passed, without the age condition.
	NoAge
)

func (r Rules) String() string {
	return [...]string{"Keep", "NeverKeep", "NoAge"}[r]
}

// Actor is a caller of the model: a holder at the start, or a waiter in
// the lines of every name of its Set (a multi-lock if it has several).
type Actor struct {
	Name    string
	Set     []int
	Holding bool // it holds its set at the start; else it waits for it
	// Turns: a Lock caller that, after each release, takes its name again
	// (joining the end of the line) for ever. It never counts as
	// finished.
	Turns bool
}

// Config is one model: its names, its actors in age order (the first
// waiter is the oldest), and the rule.
type Config struct {
	Names  int
	Actors []Actor
	Rules  Rules
}

// Actor states.
const (
	waiting int8 = iota
	holding
	done
)

// state is one node's lines at one moment. Places are ranks among the
// waiting actors (0 the oldest), -1 for the others.
type state struct {
	holder  [MaxNames]int8 // the actor holding the name, or -1
	promise [MaxNames]int8 // the actor the name is promised to, or -1
	status  [MaxActors]int8
	place   [MaxActors]int8
	patient [MaxActors]bool // a multi-lock that has waited its TTL
}

func (c *Config) validate() error {
	if c.Names < 1 || c.Names > MaxNames || len(c.Actors) > MaxActors {
		return fmt.Errorf("waitmodel: %d names, %d actors: too many", c.Names, len(c.Actors))
	}
	for _, a := range c.Actors {
		if len(a.Set) == 0 || a.Turns && len(a.Set) != 1 {
			return fmt.Errorf("waitmodel: actor %s: an empty set, or turns taken on several names", a.Name)
		}
		for _, n := range a.Set {
			if n < 0 || n >= c.Names {
				return fmt.Errorf("waitmodel: actor %s: name %d out of range", a.Name, n)
			}
		}
	}
	return nil
}

// initial is the start: holders hold, waiters wait in age order.
func (c *Config) initial() state {
	var s state
	for n := range s.holder {
		s.holder[n], s.promise[n] = -1, -1
	}
	for i := range s.place {
		s.place[i] = -1
		s.status[i] = done
	}
	rank := int8(0)
	for i, a := range c.Actors {
		if a.Holding {
			s.status[i] = holding
			for _, n := range a.Set {
				s.holder[n] = int8(i)
			}
			continue
		}
		s.status[i], s.place[i] = waiting, rank
		rank++
	}
	return s
}

// Event is one transition: an actor's release, attempt or patience.
type Event struct {
	Kind  EventKind
	Actor int
}

// EventKind names what an actor does.
type EventKind int8

const (
	Release  EventKind = iota // a holder releases its set
	Attempt                   // a waiter's script (takeSet, or a Lock's acquire)
	Patience                  // a waiting multi-lock's TTL of waiting runs out
)

func (c *Config) describe(e Event) string {
	return [...]string{"release", "attempt", "TTL passes"}[e.Kind] + " " + c.Actors[e.Actor].Name
}

// step returns the successors of s, one per enabled event.
func (c *Config) step(s state, visit func(Event, state)) {
	for i, a := range c.Actors {
		switch s.status[i] {
		case holding:
			visit(Event{Release, i}, c.release(s, i))
		case waiting:
			visit(Event{Attempt, i}, c.attempt(s, i))
			if len(a.Set) > 1 && !s.patient[i] {
				t := s
				t.patient[i] = true
				visit(Event{Patience, i}, t)
			}
		}
	}
}

// first is the waiting actor with the lowest place after `after` (-1: from
// the start) in name n's line, or -1.
func (c *Config) first(s *state, n int, after int8) int8 {
	best := int8(-1)
	for i, a := range c.Actors {
		if s.status[i] != waiting || !slices.Contains(a.Set, n) || s.place[i] <= after {
			continue
		}
		if best < 0 || s.place[i] < s.place[best] {
			best = int8(i)
		}
	}
	return best
}

// release is release.lua on every name of i's set: each is promised to the
// first waiter of its line. A Lock caller taking turns then joins the end of
// its line again.
func (c *Config) release(s state, i int) state {
	for _, n := range c.Actors[i].Set {
		s.holder[n] = -1
		s.promise[n] = c.first(&s, n, -1)
	}
	s.status[i] = done
	if c.Actors[i].Turns {
		s.status[i] = waiting
		s.place[i] = MaxActors // the end of the line, ranked by normalize
	}
	return normalize(s)
}

// attempt is takeSet (multi_take.lua, multi_wait.lua) or a Lock's
// acquire.lua: the whole set if every name is free and promised to i or to
// nobody; else each name promised to i is kept or passed on.
func (c *Config) attempt(s state, i int) state {
	me := int8(i)
	set := c.Actors[i].Set
	free := true
	for _, n := range set {
		if s.holder[n] >= 0 || s.promise[n] >= 0 && s.promise[n] != me {
			free = false
		}
	}
	if free {
		for _, n := range set {
			s.holder[n], s.promise[n] = me, -1
		}
		s.status[i], s.place[i], s.patient[i] = holding, -1, false
		return normalize(s)
	}
	keep := c.keeps(&s, i)
	for _, n := range set {
		if s.promise[n] == me && !keep {
			s.promise[n] = c.first(&s, n, s.place[i]) // passOn: only to a waiter after it
		}
	}
	return s
}

// keeps is keepsPromises.
func (c *Config) keeps(s *state, i int) bool {
	if c.Rules == NeverKeep || len(c.Actors[i].Set) < 2 || !s.patient[i] {
		return false
	}
	if c.Rules == NoAge {
		return true
	}
	for _, n := range c.Actors[i].Set {
		if p := s.promise[n]; p >= 0 && p != int8(i) && (s.place[p] < 0 || s.place[p] <= s.place[i]) {
			return false
		}
	}
	return true
}

// normalize ranks the places of the waiting actors 0, 1, ... in order.
func normalize(s state) state {
	var order []int
	for i := range s.place {
		if s.status[i] == waiting {
			order = append(order, i)
		} else {
			s.place[i] = -1
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(s.place[a]) - int(s.place[b]) })
	for r, i := range order {
		s.place[i] = int8(r)
	}
	return s
}
