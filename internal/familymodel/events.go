package familymodel

import "fmt"

// EventKind is what happens in one step.
type EventKind uint8

const (
	Tick     EventKind = iota // the clock advances one tick
	Begin                     // client C begins an attempt (Sem: on slot Arg)
	Land                      // a call of client C (kind Arg) lands on node N
	Decide                    // client C decides its round
	Unlock                    // client C, holding, releases
	Expire                    // client C's hold ends at its validity
	Wipe                      // node N loses its data
	Repair                    // node N is repaired (fenced) or restarts empty (Sem)
	OpBegin                   // the operator's SetPermits begins
	OpLand                    // its call lands on node N
	OpDecide                  // it decides its round
	Retain                    // the retention passes: H, HR and E expire
)

// Event is one step.
type Event struct {
	Kind EventKind
	C, N uint8
	Arg  uint8
}

func (e Event) String() string {
	switch e.Kind {
	case Tick:
		return "tick"
	case Begin:
		return fmt.Sprintf("c%d begins", e.C)
	case Land:
		return fmt.Sprintf("c%d's %s call lands on n%d", e.C, callName(e.Arg), e.N)
	case Decide:
		return fmt.Sprintf("c%d decides", e.C)
	case Unlock:
		return fmt.Sprintf("c%d unlocks", e.C)
	case Expire:
		return fmt.Sprintf("c%d's hold ends", e.C)
	case Wipe:
		return fmt.Sprintf("n%d is wiped", e.N)
	case Repair:
		return fmt.Sprintf("n%d is repaired", e.N)
	case OpBegin:
		return "SetPermits begins"
	case OpLand:
		return fmt.Sprintf("SetPermits' call lands on n%d", e.N)
	case Retain:
		return "the retention passes (H, HR, E expire)"
	default:
		return "SetPermits decides"
	}
}

func callName(k uint8) string {
	switch k {
	case callAcquire:
		return "acquire"
	case callCommit:
		return "commit"
	}
	return "release"
}

// sys is a state under its bounds and rules.
type sys struct {
	*State
	cfg   *Config
	rules *Rules
}

// Enabled appends every event enabled in s.
func (s sys) Enabled(evs []Event) []Event {
	cfg := s.cfg
	if int(s.Now) < cfg.MaxTime {
		evs = append(evs, Event{Kind: Tick})
	}
	for ci := range cfg.Roles {
		c, cl := uint8(ci), &s.Clients[ci]
		pending := false
		for i := range MaxNodes {
			for _, k := range []uint8{callAcquire, callCommit, callRelease} {
				if cl.Calls[i]&k == 0 {
					continue
				}
				pending = true
				evs = append(evs, Event{Kind: Land, C: c, N: uint8(i), Arg: k})
			}
		}
		switch cl.Phase {
		case Idle:
			if !pending && int(cl.Att) < cfg.Attempts && int(s.Now) >= cfg.ClientsFrom {
				if cfg.Scenario != Sem {
					evs = append(evs, Event{Kind: Begin, C: c})
				}
				for slot := range cl.K {
					if cfg.Scenario == Sem {
						evs = append(evs, Event{Kind: Begin, C: c, Arg: slot})
					}
				}
			}
		case Round1, Round2:
			if e := (Event{Kind: Decide, C: c}); s.decidable(cl) {
				evs = append(evs, e)
			}
		case Holding:
			if e := (Event{Kind: Expire, C: c}); s.Now >= cl.Until {
				evs = append(evs, e)
			} else if e := (Event{Kind: Unlock, C: c}); s.Now < cl.Until && cfg.Unlock {
				evs = append(evs, e)
			}
		}
	}
	for i := range MaxNodes {
		n := &s.Nodes[i]
		if n.Up && s.WipesLeft > 0 {
			evs = append(evs, Event{Kind: Wipe, N: uint8(i)})
		}
		delayed := int(s.Now) >= int(n.WipedAt)+cfg.TTL || s.rules.NoRepairDelay
		if !n.Up && delayed && (cfg.Scenario == Sem || s.upOthers(i) >= majority) {
			evs = append(evs, Event{Kind: Repair, N: uint8(i)})
		}
	}
	if s.Retains > 0 && s.quiet() {
		evs = append(evs, Event{Kind: Retain})
	}
	if cfg.Scenario == Sem && cfg.Shrink > 0 {
		op := &s.Op
		if op.Phase == 0 && int(s.Now) >= cfg.ShrinkFrom {
			evs = append(evs, Event{Kind: OpBegin})
		}
		for i := range MaxNodes {
			if op.Calls[i] {
				evs = append(evs, Event{Kind: OpLand, N: uint8(i)})
			}
		}
		if op.Phase == 1 || op.Phase == 2 {
			yes, heard := count(op.Heard)
			if yes >= majority || heard == MaxNodes {
				evs = append(evs, Event{Kind: OpDecide})
			}
		}
	}
	return evs
}

// quiet: no client has an attempt under way or a call in flight.
func (s sys) quiet() bool {
	for c := range s.cfg.Roles {
		cl := &s.Clients[c]
		if cl.Phase == Round1 || cl.Phase == Round2 || cl.Calls != [MaxNodes]uint8{} {
			return false
		}
	}
	return true
}

// decidable: the client may decide its round: a majority granted (the
// library returns there), every node answered, or it may stop waiting.
func (s sys) decidable(cl *Client) bool {
	yes, heard := count(cl.Heard)
	return yes >= majority || heard == MaxNodes || s.cfg.Timeouts
}

func count(h [MaxNodes]uint8) (yes, heard int) {
	for _, x := range h {
		if x == heardYes {
			yes++
		}
		if x != notHeard {
			heard++
		}
	}
	return yes, heard
}

func (s sys) upOthers(i int) int {
	n := 0
	for j := range MaxNodes {
		if j != i && s.Nodes[j].Up {
			n++
		}
	}
	return n
}
