package protomodel

// An online repair of one node (internal/identity's repair_online.go, repair.go): rounds of
// reads of every node's state (node_state.lua, one event per node), a
// decision when the round is complete, then the uuid swap (swap_uuid.lua)
// and the repair script (repair.lua) on the target, each a separate event.
// Anything may happen between the reads, the decision and the writes. A
// round that cannot go on (delay not passed, no intact majority, a write
// that found the node changed) starts a new round, as the online repair
// retries; a repair ends when it wrote, or found its target intact.
//
// The model leaves out takeUUID's check after the swap that no other node
// holds the claimed uuid: the model's repairers only ever claim the target's
// own uuid (the one the client learnt; of the generation a reprovision
// gave, State.ident), so no other node can hold it.

// Phase of a repairer.
const (
	RepIdle     = iota // not started
	RepReading         // reading the nodes' states
	RepSwapping        // decided; the uuid swap is next
	RepWriting         // the repair script is next
	RepDone            // wrote, found the target intact, or stopped
)

// Repairer is one repair process of one target node.
type Repairer struct {
	Phase  uint8
	Target int8

	// This round's reads.
	Read       uint8 // nodes read, a bit each
	RoundStart int16 // global time of the round's first read
	Intact     uint8 // intact nodes other than the target
	Top        int32 // their largest G
	Tgt        NodeState

	// The repairer's memory (RepairerClock): the stamp it saw on the target
	// and when, on its own clock, it first saw it.
	Seen   Stamp
	SeenAt int16

	// The decision: the uuid to claim, the counter to write, the stamp the
	// writes are conditional on.
	U    int8
	G    int32
	Want Stamp
}

// startRepair: a client that found node target not intact starts repairing it.
func (s sys) startRepair(ri, target int, log *[]string) {
	s.Reps[ri] = Repairer{Phase: RepReading, Target: int8(target)}
	s.RepairsStarted++
	if log != nil {
		s.logf(log, "r%d starts repairing n%d", ri, target)
	}
}

// repRead: node j runs repairer ri's state read. The last read of a round
// decides.
func (s sys) repRead(ri, j int, log *[]string) {
	r := &s.Reps[ri]
	if r.Read == 0 && s.rules.FreshReads {
		r.RoundStart = s.Now
	}
	r.Read |= 1 << j
	st := s.Nodes[j].ReadState(s.nodeNow(j))
	if j == int(r.Target) {
		r.Tgt = st
		r.Tgt.G = 0 // not used
		if !s.rules.UptimeCounts {
			r.Tgt.Uptime = 0
		}
		if s.rules.usesSeen() && st.Stamp.Set && st.Stamp != r.Seen {
			r.Seen, r.SeenAt = st.Stamp, s.Now
		}
		if log != nil {
			s.logf(log, "r%d reads n%d (target): id=%d uuid=%d stamp=%s node time %d uptime %d G=%d",
				ri, j, st.ID, st.UUID, stampString(st.Stamp), st.Now, st.Uptime, st.G)
		}
	} else {
		if st.Intact {
			r.Intact++
			r.Top = max(r.Top, st.G)
		}
		if log != nil {
			s.logf(log, "r%d reads n%d: id=%d%s G=%d", ri, j, st.ID, notIntact(st.Intact), st.G)
		}
	}
	if r.Read == 1<<N-1 {
		s.repDecide(ri, log)
	}
}

// repDecide is repair's decision once every node was read.
func (s sys) repDecide(ri int, log *[]string) {
	r := &s.Reps[ri]
	switch {
	case r.Tgt.ID >= 0:
		if log != nil {
			s.logf(log, "r%d: n%d is intact: nothing to do", ri, r.Target)
		}
		*r = Repairer{Phase: RepDone}
		return
	case int(r.Intact) < Majority:
		s.retry(ri, "no intact majority", log)
		return
	case !s.rules.delayPassed(r, int(s.Now), s.cfg.TTL):
		s.retry(ri, "too soon", log)
		return
	}
	r.U, r.G, r.Want = s.ident(int(r.Target)), r.Top+1, r.Tgt.Stamp
	if r.Tgt.UUID == r.U {
		r.Phase = RepWriting // takeUUID: it still holds its own uuid
	} else {
		r.Phase = RepSwapping
	}
	if log != nil {
		s.logf(log, "r%d decides: repair n%d with G=%d (conditional on uuid %d%s)",
			ri, r.Target, r.G, r.U, s.wantNote(r))
	}
	// Canonical form: only what the writes and a retry use remains.
	r.Read, r.RoundStart, r.Intact, r.Top = 0, 0, 0, 0
	r.Tgt = NodeState{UUID: r.Tgt.UUID}
}

func (s sys) wantNote(r *Repairer) string {
	if s.rules.StampedWrites {
		return " and stamp " + stampString(r.Want)
	}
	return ""
}

// repSwap: the target runs the uuid swap from the uuid read to U.
func (s sys) repSwap(ri int, log *[]string) {
	r := &s.Reps[ri]
	got := s.Nodes[r.Target].SwapUUID(s.nodeNow(int(r.Target)), r.Tgt.UUID, r.U, s.rules.writeStamp(r), s.rules.WritePrelude)
	if log != nil {
		s.logf(log, "r%d swap uuid %d->%d on n%d%s: holds %d", ri, r.Tgt.UUID, r.U, r.Target, s.wantNote(r), got)
	}
	if got != r.U {
		s.retry(ri, "node changed during the repair", log)
		return
	}
	r.Phase = RepWriting
}

// repWrite: the target runs the repair script.
func (s sys) repWrite(ri int, log *[]string) {
	r := &s.Reps[ri]
	res := s.Nodes[r.Target].RepairWrite(s.nodeNow(int(r.Target)), r.U, r.U, r.G, s.rules.writeStamp(r), s.rules.WritePrelude)
	switch res {
	case RepairDone:
		if log != nil {
			s.logf(log, "r%d repair script on n%d: G=%d E=%d id=%d: n%d is back",
				ri, r.Target, s.Nodes[r.Target].G, s.Nodes[r.Target].E, r.U, r.Target)
		}
		*r = Repairer{Phase: RepDone}
	case RepairOtherID:
		if log != nil {
			s.logf(log, "r%d repair script on n%d: holds another id: stops", ri, r.Target)
		}
		*r = Repairer{Phase: RepDone}
	default:
		if log != nil {
			s.logf(log, "r%d repair script on n%d: refused (uuid%s changed)", ri, r.Target,
				map[bool]string{true: " or stamp", false: ""}[s.rules.StampedWrites])
		}
		s.retry(ri, "node changed during the repair", log)
	}
}

// retry begins a new round of reads; the repairer keeps its memory of the
// stamp.
func (s sys) retry(ri int, why string, log *[]string) {
	r := &s.Reps[ri]
	*r = Repairer{Phase: RepReading, Target: r.Target, Seen: r.Seen, SeenAt: r.SeenAt}
	if log != nil {
		s.logf(log, "r%d: %s: reads again", ri, why)
	}
}

func stampString(st Stamp) string {
	if !st.Set {
		return "none"
	}
	return "(t" + itoa(int(st.T)) + ",nonce " + itoa(int(st.Nonce)) + ",run " + itoa(int(st.Run)) + ")"
}

func notIntact(intact bool) string {
	if intact {
		return ""
	}
	return " (not intact)"
}
