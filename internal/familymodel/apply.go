package familymodel

import (
	"fmt"
	"slices"
)

// Violation is a property that failed, and why.
type Violation struct {
	Prop   string // "Lease", "Order" or "Permits"
	Detail string
}

func (v *Violation) String() string { return v.Prop + ": " + v.Detail }

// Apply applies e to s (which it changes) and checks the properties after
// it: the first that fails.
func (s sys) Apply(e Event) *Violation {
	cfg := s.cfg
	switch e.Kind {
	case Tick:
		s.Now++
		for i := range s.Nodes {
			s.Nodes[i].expire(s.Now)
		}
	case Begin:
		cl := &s.Clients[e.C]
		att := cl.Att + 1
		*cl = Client{Phase: Round1, Att: att, Start: s.Now, Slot: e.Arg, K: cl.K, V: cl.V, AK: cl.K, AV: cl.V, Began: s.returnedFor(int(e.C))}
		for i := range cl.Calls {
			cl.Calls[i] = callAcquire
		}
	case Land:
		s.land(e)
	case Decide:
		return s.decide(int(e.C))
	case Unlock:
		cl := &s.Clients[e.C]
		for i := range cl.Calls {
			cl.Calls[i] |= callRelease
		}
		cl.idle()
	case Expire:
		s.Clients[e.C].idle()
	case Wipe:
		s.WipesLeft--
		s.Nodes[e.N].wipe(s.Now)
	case Repair:
		n := &s.Nodes[e.N]
		n.Up = true
		if cfg.fenced() {
			// The floor read from the other nodes (a majority): above
			// every token committed on a majority.
			for j := range MaxNodes {
				if s.Nodes[j].Up && j != int(e.N) {
					n.E = max(n.E, s.Nodes[j].G+1)
				}
			}
			n.G = n.E
			if s.rules.NoRepairFloor {
				n.E = 0
			}
		}
	case OpBegin:
		s.Op = Operator{Phase: 1, Calls: [MaxNodes]bool{true, true, true}}
	case OpLand:
		s.opLand(int(e.N))
	case Retain:
		s.Retains--
		for i := range s.Nodes {
			s.Nodes[i].retain()
		}
	case OpDecide:
		op := &s.Op
		yes, _ := count(op.Heard)
		switch {
		case yes < majority:
			op.Phase = 4
		case op.Phase == 1:
			op.Phase, op.V, op.Heard = 2, op.V+1, [MaxNodes]uint8{}
			op.Calls = [MaxNodes]bool{true, true, true}
		default:
			op.Phase, op.At = 3, s.Now
		}
	}
	return s.check()
}

// land runs a call's script on its node; a call of the round the client is
// in is heard, a late one only acts.
func (s sys) land(e Event) {
	cfg, r, ttl := s.cfg, s.rules, uint8(s.cfg.TTL)
	c, cl, n := e.C, &s.Clients[e.C], &s.Nodes[e.N]
	id := e.N + 1
	cl.Calls[e.N] &^= e.Arg
	names := cfg.names(int(c))
	var rep Reply
	switch e.Arg {
	case callRelease:
		if n.Up {
			n.Release(cfg.Roles[c], names[0]+int(cl.Slot), s.Now, c, cl.Att)
		}
		return
	case callCommit:
		rep = n.Commit(r, cfg.Roles[c], names[0], cl.Best)
		if cl.Phase == Round2 {
			switch {
			case rep.OK:
				cl.Heard[e.N] = heardYes
			case rep.Cand != 0:
				cl.Heard[e.N] = heardRefused
			default:
				cl.Heard[e.N] = heardNo
			}
		}
		return
	}
	switch cfg.Roles[c] {
	case Reader:
		rep = n.Read(r, s.Now, id, c, cl.Att, ttl)
	case MultiLock:
		rep = n.MultiTake(r, s.Now, id, c, cl.Att, ttl)
	case Slot:
		rep = n.Take(r, s.Now, c, cl.Att, ttl, cl.Slot, cl.AK, cl.AV)
	default:
		rep = n.Acquire(r, cfg.Scenario == RW, s.Now, id, c, cl.Att, ttl, names[0])
	}
	if cl.Phase != Round1 {
		return
	}
	cl.Heard[e.N] = heardNo
	if rep.OK {
		cl.Heard[e.N] = heardYes
	}
	cl.Best = max(cl.Best, rep.Cand)
	if rep.V > cl.LV {
		cl.LK, cl.LV = rep.K, rep.V
	}
}

// decide ends client c's round: on to round 2, a hold, or a rollback.
func (s sys) decide(c int) *Violation {
	cfg, cl := s.cfg, &s.Clients[c]
	yes, _ := count(cl.Heard)
	refused := false
	for _, h := range cl.Heard {
		refused = refused || h == heardRefused
	}
	won := yes >= majority && !refused
	switch {
	case won && cl.Phase == Round1 && cfg.fenced():
		cl.Phase, cl.Heard, cl.Floor = Round2, [MaxNodes]uint8{}, s.held(c)
		for i := range cl.Calls {
			cl.Calls[i] |= callCommit
		}
		return nil
	case won && (cfg.NoValidityCheck || int(s.Now) < int(cl.Start)+cfg.TTL-1):
		cl.Phase, cl.Until, cl.Heard = Holding, cl.Start+uint8(cfg.TTL)-1, [MaxNodes]uint8{}
		if cfg.fenced() {
			return s.returned(c)
		}
		return s.check()
	}
	for i := range cl.Calls {
		cl.Calls[i] |= callRelease
	}
	if cl.LV > cl.V {
		cl.K, cl.V = cl.LK, cl.LV
	}
	cl.idle()
	return s.check()
}

// returnedFor is the largest token returned so far to a hold that
// conflicts with client c's.
func (s sys) returnedFor(c int) uint8 {
	cfg, f := s.cfg, uint8(0)
	for _, m := range cfg.names(c) {
		f = max(f, s.RetW[m])
	}
	if cfg.Scenario == RW && cfg.Roles[c] == Writer {
		f = max(f, s.RetR)
	}
	return f
}

// held is the largest token of a hold conflicting with client c's that a
// majority of the nodes holds (H of c's names; HR too for a writer of the
// RW lock): the commit checks are what keep c's token above it. A token
// acknowledged by a node since wiped is not held there.
func (s sys) held(c int) uint8 {
	cfg := s.cfg
	var v [MaxNodes]uint8
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if !n.Up {
			continue
		}
		for _, m := range cfg.names(c) {
			v[i] = max(v[i], n.H[m])
		}
		if cfg.Scenario == RW && cfg.Roles[c] == Writer {
			v[i] = max(v[i], n.HR)
		}
	}
	// The majority-th largest: held by at least a majority.
	slices.Sort(v[:])
	return v[MaxNodes-majority]
}

// returned checks U, M1 and Order as client c returns its token: no token
// is returned twice; it exceeds every conflicting token returned before
// its attempt began (M1, docs/fencing.md's) and every conflicting token a
// majority held when its commit round began (Order: what H and HR give).
func (s sys) returned(c int) *Violation {
	cfg, cl := s.cfg, &s.Clients[c]
	t := cl.Best
	switch {
	case s.Returned[t/64]&(1<<(t%64)) != 0:
		return &Violation{"U", fmt.Sprintf("c%d (%s) returned token %d, returned before", c, cfg.Roles[c], t)}
	case t <= cl.Began:
		return &Violation{"M1", fmt.Sprintf("c%d (%s) returned token %d, not above %d, returned to a conflicting hold before its attempt began", c, cfg.Roles[c], t, cl.Began)}
	case t <= cl.Floor:
		return &Violation{"Order", fmt.Sprintf("c%d (%s) returned token %d, not above %d, which a majority held for a conflicting hold when its commit began", c, cfg.Roles[c], t, cl.Floor)}
	}
	s.Returned[t/64] |= 1 << (t % 64)
	if cfg.Roles[c] == Reader {
		s.RetR = max(s.RetR, t)
	} else {
		for _, m := range cfg.names(c) {
			s.RetW[m] = max(s.RetW[m], t)
		}
	}
	return s.check()
}

func (s sys) opLand(i int) {
	op, n := &s.Op, &s.Nodes[i]
	op.Calls[i] = false
	ok := false
	switch op.Phase {
	case 1:
		if ok = n.Up; ok {
			op.V = max(op.V, n.SizeV)
		}
	default:
		ok = n.SetSize(uint8(s.cfg.Shrink), op.V)
		op.Stored[i] = op.Stored[i] || ok
	}
	if op.Phase == 1 || op.Phase == 2 {
		op.Heard[i] = heardNo
		if ok {
			op.Heard[i] = heardYes
		}
	}
}

// check is the Lease property (no two conflicting holds within their
// validity) and, for a semaphore, Permits: once SetPermits returned, from
// one TTL later and for as long as a majority of the nodes has kept its
// write since, at most the new size is held.
func (s sys) check() *Violation {
	cfg := s.cfg
	holding := func(c int) bool { cl := &s.Clients[c]; return cl.Phase == Holding && s.Now < cl.Until }
	if !cfg.NoValidityCheck {
		for a := range cfg.Roles {
			for b := a + 1; b < len(cfg.Roles); b++ {
				if !holding(a) || !holding(b) {
					continue
				}
				if cfg.conflict(a, b) || cfg.Scenario == Sem && s.Clients[a].Slot == s.Clients[b].Slot {
					return &Violation{"Lease", fmt.Sprintf("c%d (%s) and c%d (%s) both hold at t=%d",
						a, cfg.Roles[a], b, cfg.Roles[b], s.Now)}
				}
			}
		}
	}
	if cfg.Scenario != Sem || s.Op.Phase != 3 {
		return nil
	}
	kept, held := 0, 0
	for i := range MaxNodes {
		if s.Nodes[i].Shrunk {
			kept++
		}
	}
	if kept < majority {
		s.Op.Lapsed = true
	}
	if int(s.Now) < int(s.Op.At)+cfg.TTL {
		return nil
	}
	for c := range cfg.Roles {
		if holding(c) {
			held++
		}
	}
	if !s.Op.Lapsed && held > cfg.Shrink {
		return &Violation{"Permits", fmt.Sprintf("%d permits held at t=%d, %d ticks after SetPermits(%d) returned, which %d nodes keep",
			held, s.Now, int(s.Now)-int(s.Op.At), cfg.Shrink, kept)}
	}
	return nil
}
