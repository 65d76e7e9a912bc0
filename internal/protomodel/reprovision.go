package protomodel

// Reprovision (internal/identity/reprovision.go, lua/reset.lua; issue 32):
// what an operator runs once a majority of the nodes lost their data, when
// no repair can help (a repair needs an intact majority). Like a repair,
// it is separate events, so that anything may happen between them: a
// round of reads of every node's state (node_state.lua, an event per
// node), a decision once the round is complete, then the reset script on
// each node, an event per node, in any order. A reset raises the node's
// counters to the floor (G and E), gives it its new identity (uuid, id,
// the replication id recorded) and removes its stamp; the lock keys stay.
//
// The decision, with ProvDelay: every node that is not intact must have
// been out for a TTL by its own clock (the stamp's age at the read) and by
// the reprovisioner's (it first saw that same stamp at least a TTL before
// the round began: restartDelay's begun), else it reads again, as
// waitOutLosses does; without ProvDelay it decides at once. Each reset is
// conditional (ProvConditional) on the uuid, the id and the stamp read,
// and (ProvSameRun) on the run read; a node that changed is left as it is.
//
// The floor: Reprovision takes "above", the highest token the stores
// accepted; the model takes the highest token returned so far, at the
// decision, and the floor counter above/256 + 1, as Reprovision does. The
// new identities: node j's uuid and id become j + N*Gen, Gen counting the
// reprovisions decided; a repair claims its target's of the generation
// (State.ident). The model has no roster but a key's presence, so the new
// roster is not compared by anything.

// MaxReprovisions bounds Config.Reprovisions (the ids stay below 256).
const MaxReprovisions = 3

// Phase of the reprovisioner.
const (
	ProvIdle    = iota // not running
	ProvReading        // reading the nodes' states
	ProvWriting        // decided; the resets are next
)

// ResetCond is what a reset script is conditional on: the node's state as
// read.
type ResetCond struct {
	UUID, ID int8
	Stamp    Stamp // as stored, of any run
	Run      int16 // the run read; -1: not compared (reset.lua)
}

// provRead is what a read of one node returned.
type provRead struct {
	ResetCond
	Intact bool
	Now    int16 // node time (for the stamp's age)
}

// Reprovisioner is the operator's reprovision.
type Reprovisioner struct {
	Phase      uint8
	Read       uint8 // nodes read this round, a bit each
	RoundStart int16 // global time of the round's first read
	Got        [N]provRead

	// Its memory (ProvDelay): per node, the stamp it saw last, and when it
	// first saw it, on its own clock (stampWatch).
	Seen   [N]Stamp
	SeenAt [N]int16

	Floor int32 // the floor counter decided
	Todo  uint8 // nodes whose reset has not run, a bit each
}

// Replies of Reset.
const (
	ResetDone    = 1
	ResetChanged = 2 // the node changed since it was read: nothing written
)

// Reset is lua/reset.lua: if the node still holds what was read (want !=
// nil: the uuid, the id and the stamp; the run too if want.Run >= 0),
// G = max(G, f), E = max(E, f), uuid and id become id, the roster, the
// replication id recorded (the node's run), no stamp. The lock keys stay.
func (n *Node) Reset(f int32, id int8, want *ResetCond) int {
	if want != nil && (n.UUID != want.UUID || n.ID != want.ID || n.Stamp != want.Stamp ||
		want.Run >= 0 && int(n.Run) != int(want.Run)) {
		return ResetChanged
	}
	n.G = max(n.G, f)
	n.E = max(n.E, f)
	n.UUID, n.ID, n.Roster, n.RecRun = id, id, true, n.Run
	n.Stamp = Stamp{}
	return ResetDone
}

// ident is node j's uuid and id in the deployment's current generation.
func (s *State) ident(j int) int8 { return int8(j + N*int(s.Gen)) }

// provEvents appends the reprovisioner's events.
func (s sys) provEvents(evs []Event) []Event {
	p := &s.Prov
	switch p.Phase {
	case ProvIdle:
		if int(s.Provs) < s.cfg.Reprovisions && int(s.Now) >= s.cfg.RepairsFrom && s.someLost() {
			evs = append(evs, Event{EvProvStart, 0, 0})
		}
	case ProvReading:
		for j := range N {
			if p.Read&(1<<j) == 0 {
				evs = append(evs, Event{EvProvRead, 0, int8(j)})
			}
		}
	case ProvWriting:
		for j := range N {
			if p.Todo&(1<<j) != 0 {
				evs = append(evs, Event{EvProvWrite, 0, int8(j)})
			}
		}
	}
	return evs
}

// someLost: a node is not intact, which is what sends an operator to
// Reprovision (with a majority lost: the model lets it run on fewer).
func (s sys) someLost() bool {
	for j := range s.Nodes {
		if !s.Nodes[j].Intact() {
			return true
		}
	}
	return false
}

// provStart: the operator starts a reprovision.
func (s sys) provStart(log *[]string) {
	s.Provs++
	s.Prov.Phase = ProvReading
	if log != nil {
		s.logf(log, "operator starts REPROVISION")
	}
}

// provRead: node j runs the reprovision's state read; the last read of a
// round decides.
func (s sys) provRead(j int, log *[]string) {
	p := &s.Prov
	if p.Read == 0 && s.rules.ProvDelay {
		p.RoundStart = s.Now
	}
	p.Read |= 1 << j
	n := &s.Nodes[j]
	st := n.ReadState(s.nodeNow(j))
	g := provRead{ResetCond: ResetCond{UUID: st.UUID, ID: st.ID, Stamp: st.Stamp, Run: -1}, Intact: st.Intact}
	if s.rules.ProvSameRun {
		g.Run = int16(n.Run)
	}
	if s.rules.ProvDelay && !st.Intact {
		g.Now = st.Now
		if st.Stamp != p.Seen[j] {
			p.Seen[j], p.SeenAt[j] = st.Stamp, s.Now
		}
	}
	p.Got[j] = g
	if log != nil {
		s.logf(log, "reprovision reads n%d: id=%d uuid=%d%s stamp=%s node time %d", j, st.ID, st.UUID, notIntact(st.Intact),
			stampString(st.Stamp), st.Now)
	}
	if p.Read == 1<<N-1 {
		s.provDecide(log)
	}
}

// provDecide is the decision once every node was read.
func (s sys) provDecide(log *[]string) {
	p := &s.Prov
	if s.rules.ProvDelay {
		for j := range N {
			g := &p.Got[j]
			if !g.Intact && (int(g.Now)-int(g.Stamp.T) < s.cfg.TTL ||
				p.Seen[j] != g.Stamp || int(p.RoundStart)-int(p.SeenAt[j]) < s.cfg.TTL) {
				*p = Reprovisioner{Phase: ProvReading, Seen: p.Seen, SeenAt: p.SeenAt}
				if log != nil {
					s.logf(log, "reprovision: n%d has not been out for a TTL: reads again", j)
				}
				return
			}
		}
	}
	s.Gen++
	p.Floor, p.Todo = s.MaxReturned/256+1, 1<<N-1
	p.Phase, p.Read, p.RoundStart = ProvWriting, 0, 0
	for j := range N {
		p.Got[j].Now = 0 // canonical form: the writes do not use it
	}
	if log != nil {
		s.logf(log, "reprovision decides: floor G=%d, new ids %d..%d%s", p.Floor, s.ident(0), s.ident(N-1), s.provCondNote())
	}
}

func (s sys) provCondNote() string {
	switch {
	case !s.rules.ProvConditional:
		return ", resets unconditional"
	case s.rules.ProvSameRun:
		return ", each reset conditional on the uuid, id, stamp and run read"
	}
	return ", each reset conditional on the uuid, id and stamp read"
}

// provWrite: node j runs the reprovision's reset script.
func (s sys) provWrite(j int, log *[]string) {
	p := &s.Prov
	var want *ResetCond
	if s.rules.ProvConditional {
		want = &p.Got[j].ResetCond
	}
	n := &s.Nodes[j]
	res := n.Reset(p.Floor, s.ident(j), want)
	if log != nil {
		if res == ResetDone {
			s.logf(log, "n%d reset: id=%d G=%d E=%d, intact%s", j, n.ID, n.G, n.E, heldNote(n.lockHeldBy(s.nodeNow(j))))
		} else {
			s.logf(log, "n%d reset refused: changed since it was read", j)
		}
	}
	p.Todo &^= 1 << j
	p.Got[j] = provRead{}
	if p.Todo == 0 {
		*p = Reprovisioner{Seen: p.Seen, SeenAt: p.SeenAt}
		if log != nil {
			s.logf(log, "reprovision done")
		}
	}
}

func heldNote(v uint8) string {
	if v == 0 {
		return " (no lock key)"
	}
	return " (lock key of value " + itoa(int(v)) + " kept)"
}

// encode appends the reprovisioner's canonical encoding.
func (p *Reprovisioner) encode(b []byte, ru *Rules) []byte {
	b = append(b, p.Phase, p.Read, p.Todo)
	b = p16(b, int(p.RoundStart))
	b = p16(b, int(p.Floor))
	for j := range N {
		g := &p.Got[j]
		b = append(b, byte(g.UUID), byte(g.ID), byte(g.Run), bit(g.Intact))
		b = g.Stamp.encode(b)
		b = p16(b, int(g.Now))
		if ru.ProvDelay {
			b = p.Seen[j].encode(b)
			b = p16(b, int(p.SeenAt[j]))
		}
	}
	return b
}
