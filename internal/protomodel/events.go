package protomodel

// Kind of event.
type Kind uint8

// The events. A is a client, repairer or node; B a node, unless said.
const (
	EvTick      Kind = iota //
	EvWipe                  // A node; B 1: with a restart
	EvJump                  // A node's clock jumps forward
	EvSave                  // node A saves a snapshot
	EvRollback              // node A restarts from its snapshot
	EvStart                 // A client begins an attempt
	EvAcqExec               // node B runs client A's round-1 call
	EvDecide1               // client A receives round-1 replies B (a bit per node) and decides
	EvComExec               // node B runs client A's commit
	EvDecide2               // client A receives commit replies B (a bit per node) and decides
	EvGiveUp                // client A stops waiting: the round is lost
	EvRelExec               // node B runs client A's release
	EvUnlock                // client A unlocks
	EvRepStart              // repairer A starts repairing node B
	EvRepRead               // node B runs repairer A's state read
	EvRepSwap               // the target runs repairer A's uuid swap
	EvRepWrite              // the target runs repairer A's repair script
	EvExtStart              // holder A begins an extension; B 1: of ShortTTL
	EvExtExec               // node B%N runs client A's call of extension B/N
	EvExtDecide             // holder A receives extension replies B (a bit per node) and decides
	EvExtGiveUp             // holder A stops waiting: the extension fails
	EvExtHear               // client A hears, late, the reply of extension B/N's call to node B%N
	EvProvStart             // the operator starts a reprovision
	EvProvRead              // node B runs the reprovision's state read
	EvProvWrite             // node B runs the reprovision's reset script
)

// Event is one step of the system.
type Event struct {
	Kind Kind
	A, B int8
}

// Effect is what the properties need to know of a step.
type Effect struct {
	Success bool // client Client's attempt succeeded with Token
	Client  int8
	Token   int32
	Floor   int32 // the largest token returned before that attempt began
}

// Enabled appends the events enabled in s, or, where one client's round 1
// is waiting for nothing but its own decision, only that decision (see
// eagerDecision).
func (s sys) Enabled(evs []Event) []Event {
	if ci := s.eagerDecision(); ci >= 0 {
		return s.decisions(evs, ci)
	}
	return s.enabled(evs)
}

// eagerDecision is a client in round 1 all of whose acquisitions have run,
// or -1. Its decision (which replies it counts, or giving up) reads and
// writes only its own state, and no event of anyone else reads that state
// or can add to its choices, so every path from here that takes another
// event first reaches the same states as one that decides first (an ample
// set, in the terms of partial-order reduction: persistent, invisible to
// the properties, and on no cycle). Exploring the decision alone loses no
// reachable violation and saves the states where the client waits.
func (s sys) eagerDecision() int {
	if s.cfg.NoReduction {
		return -1
	}
	for ci := range s.Clients[:s.cfg.Clients] {
		c := &s.Clients[ci]
		if c.Phase == Round1 && c.Acq[0] != MsgSent && c.Acq[1] != MsgSent && c.Acq[2] != MsgSent {
			return ci
		}
	}
	return -1
}

// decisions appends client ci's decision events.
func (s sys) decisions(evs []Event, ci int) []Event {
	c := &s.Clients[ci]
	switch c.Phase {
	case Round1:
		avail := replied(&c.Acq)
		for m := uint8(1); m < 1<<N; m++ {
			if m&^avail == 0 && firstDecided(m, c.decided1) {
				evs = append(evs, Event{EvDecide1, int8(ci), int8(m)})
			}
		}
	case Round2:
		avail := replied(&c.Com)
		for m := uint8(1); m < 1<<N; m++ {
			if m&^avail == 0 && firstDecided(m, c.decided2) {
				evs = append(evs, Event{EvDecide2, int8(ci), int8(m)})
			}
		}
	}
	if s.cfg.Timeouts && (c.Phase == Round1 || c.Phase == Round2) {
		evs = append(evs, Event{EvGiveUp, int8(ci), 0})
	}
	return evs
}

func (s sys) enabled(evs []Event) []Event {
	cfg := s.cfg
	add := func(k Kind, a, b int) { evs = append(evs, Event{k, int8(a), int8(b)}) }
	if int(s.Wipes) < cfg.Wipes {
		for j := 0; j < N; j++ {
			if cfg.WipeNodes == 0 || cfg.WipeNodes&(1<<j) != 0 {
				if cfg.WipeNoRestart {
					add(EvWipe, j, 0)
				}
				if cfg.WipeRestart {
					add(EvWipe, j, 1)
				}
			}
		}
	}
	snap := cfg.SnapNodes
	if snap == 0 {
		snap = cfg.WipeNodes
	}
	for j := 0; j < N; j++ {
		if snap == 0 || snap&(1<<j) != 0 {
			if int(s.Saves) < cfg.Saves {
				add(EvSave, j, 0)
			}
			if int(s.Rollbacks) < cfg.Rollbacks {
				add(EvRollback, j, 0)
			}
		}
	}
	if int(s.Jumps) < cfg.Jumps {
		for j := 0; j < N; j++ {
			add(EvJump, j, 0)
		}
	}
	for ci := range s.Clients[:cfg.Clients] {
		c := &s.Clients[ci]
		if c.Phase == Idle && int(c.Attempts) < cfg.Attempts && int(s.Now) >= cfg.ClientsFrom &&
			(s.leader(ci) || int(s.Now) >= cfg.OthersFrom) {
			add(EvStart, ci, 0)
		}
		for j := 0; j < N; j++ {
			if c.Acq[j] == MsgSent {
				add(EvAcqExec, ci, j)
			}
			if c.Com[j] == MsgSent {
				add(EvComExec, ci, j)
			}
			if c.Rel[j] && c.Acq[j] != MsgSent {
				add(EvRelExec, ci, j)
			}
		}
		evs = s.decisions(evs, ci)
		if cfg.Unlock && c.Phase == Holding {
			add(EvUnlock, ci, 0)
		}
		if cfg.Extends > 0 {
			evs = s.extEvents(evs, ci)
		}
	}
	for ri := range s.Reps[:cfg.Repairers] {
		r := &s.Reps[ri]
		switch r.Phase {
		case RepIdle:
			if int(s.Now) < cfg.RepairsFrom {
				break
			}
			// A client starts a repair once it finds the node not intact
			// (noteAmnesia), or an operator does.
			for j := 0; j < N; j++ {
				if !s.Nodes[j].Intact() && (cfg.RepairNodes == 0 || cfg.RepairNodes&(1<<j) != 0) {
					add(EvRepStart, ri, j)
				}
			}
		case RepReading:
			for j := 0; j < N; j++ {
				if r.Read&(1<<j) == 0 {
					add(EvRepRead, ri, j)
				}
			}
		case RepSwapping:
			add(EvRepSwap, ri, 0)
		case RepWriting:
			add(EvRepWrite, ri, 0)
		}
	}
	if cfg.Reprovisions > 0 {
		evs = s.provEvents(evs)
	}
	// The tick last: a depth-first search then lets time pass only once
	// it has tried everything else here.
	if int(s.Now) < cfg.MaxTime {
		add(EvTick, 0, 0)
	}
	return evs
}

// Apply runs event e on s; log, if not nil, receives a line per step.
func (s sys) Apply(e Event, log *[]string) Effect {
	eff := s.apply(e, log)
	s.dropNoOpReleases()
	return eff
}

func (s sys) apply(e Event, log *[]string) Effect {
	a, b := int(e.A), int(e.B)
	switch e.Kind {
	case EvTick:
		s.tick(log)
	case EvWipe:
		s.wipe(a, b == 1, log)
	case EvJump:
		s.jump(a, log)
	case EvSave:
		s.save(a, log)
	case EvRollback:
		s.rollback(a, log)
	case EvStart:
		s.startAttempt(a, log)
	case EvAcqExec:
		s.acqExec(a, b, log)
	case EvDecide1:
		s.decide1(a, uint8(b), log)
	case EvComExec:
		s.comExec(a, b, log)
	case EvDecide2:
		return s.decide2(a, uint8(b), log)
	case EvGiveUp:
		s.giveUp(a, log)
	case EvRelExec:
		s.relExec(a, b, log)
	case EvUnlock:
		s.unlock(a, log)
	case EvRepStart:
		s.startRepair(a, b, log)
	case EvRepRead:
		s.repRead(a, b, log)
	case EvRepSwap:
		s.repSwap(a, log)
	case EvRepWrite:
		s.repWrite(a, log)
	case EvExtStart:
		s.extStart(a, b, log)
	case EvExtExec:
		s.extExec(a, b, log)
	case EvExtDecide:
		s.extDecide(a, uint8(b), log)
	case EvExtGiveUp:
		s.extGiveUp(a, log)
	case EvExtHear:
		s.extHear(a, b, log)
	case EvProvStart:
		s.provStart(log)
	case EvProvRead:
		s.provRead(b, log)
	case EvProvWrite:
		s.provWrite(b, log)
	}
	return Effect{}
}
