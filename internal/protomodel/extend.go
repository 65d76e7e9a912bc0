package protomodel

import "slices"

// A holder's extensions (internal/lease: extend.go, unheard.go; issue 32).
// An extension re-applies a TTL on every node: the lock's TTL, or a shorter
// one (Config.ShortTTL: For(400ms) on a 3 s lock). As for the other calls,
// each node runs it as a separate event, the decision is one event taking
// the replies received by then (decide.go), and a call not yet run when
// its extension is decided may run late, at any time after: the call of a
// shortening that failed may land after a later extension succeeded, and
// cut the key short on its node while the holder believes it valid.
//
// What the holder believes, on a majority of grants: its validity ends at
// the extension's start plus the TTL (without UnheardTTLs), or plus the
// majority-th longest of the granted nodes' TTLs, each cut to the shortest
// TTL of its extension calls unheard on that node (effectiveTTL; which
// calls count as unheard: unheard.go). An end not after now fails the
// extension (extend.go's ErrExpired). A failed extension pulls the
// validity back to its start plus its TTL, if that is earlier
// (PullDeadline); with PullAtStart, a shortening does so as it begins.
// Drift is left out, as everywhere here. Extensions of one holder run one
// at a time (ExtendTurn); an Unlock may come while one runs.

// MaxExtends bounds Config.Extends (the per-extension slots).
const MaxExtends = 3

// extState is a client's extensions in its current attempt. Extension k's
// calls stay in slot k, so a late one keeps its TTL.
type extState struct {
	N       uint8                // extensions started
	Running bool                 // the last one waits for its decision
	Start   int16                // global time when the last one began
	TTL     [MaxExtends]uint8    // each one's TTL in ticks
	Call    [MaxExtends][N]uint8 // each one's call per node (Msg*)
	Rep     [N]int8              // the running one's replies, while MsgReplied
	Cut     [N]uint8             // UnheardAtStart: the shortest TTL unheard per node when the running one began, 0: none
}

// Replies of an extension call, as the client counts them.
const (
	ExtRefused = 0  // the key does not hold the value
	ExtGranted = 1  //
	ExtNoID    = -1 // extended, but the node holds no id: counted neither way (errNotChecked)
)

// Extend is lua/fenced_extend.lua: if the lock key holds value, it
// expires at now+ttl. It returns whether it extended, and the node's id
// (-1: none). The model's client does not check the id against a node
// list (only Reprovision changes ids).
func (n *Node) Extend(now int, value uint8, ttl int) (extended bool, id int8) {
	if n.lockHeldBy(now) == value {
		n.Expiry = int16(now + ttl)
		return true, n.ID
	}
	return false, n.ID
}

// leader: client ci is one of Config.Leaders (every client, with none).
func (s sys) leader(ci int) bool { return s.cfg.Leaders == 0 || ci < s.cfg.Leaders }

// extTTL is the TTL of EvExtStart's B: 0 the lock's, 1 the short one.
func (s sys) extTTL(b int) int {
	if b == 1 {
		return s.cfg.ShortTTL
	}
	return s.cfg.TTL
}

// extEvents appends client ci's extension events.
func (s sys) extEvents(evs []Event, ci int) []Event {
	c := &s.Clients[ci]
	x := &c.Ext
	add := func(k Kind, b int) { evs = append(evs, Event{k, int8(ci), int8(b)}) }
	if c.Phase == Holding && !x.Running && int(x.N) < s.cfg.Extends && s.leader(ci) {
		add(EvExtStart, 0)
		if s.cfg.ShortTTL > 0 {
			add(EvExtStart, 1)
		}
	}
	for k := range int(x.N) {
		for j := range N {
			switch x.Call[k][j] {
			case MsgSent:
				add(EvExtExec, k*N+j)
			case MsgRan:
				if x.Running != s.rules.UnheardAtStart || s.cfg.NoReduction {
					add(EvExtHear, k*N+j)
				}
			}
		}
	}
	if x.Running {
		avail := replied(&x.Call[x.N-1])
		for m := uint8(1); m < 1<<N; m++ {
			if m&^avail == 0 && firstDecided(m, x.decided) {
				add(EvExtDecide, int(m))
			}
		}
		if s.cfg.Timeouts || s.cfg.ExtTimeouts {
			add(EvExtGiveUp, 0)
		}
	}
	return evs
}

// decided: the running extension's replies mask are decided (WonOrRefused,
// or every node answered).
func (x *extState) decided(mask uint8) bool {
	g, r := 0, 0
	for j := range N {
		if mask&(1<<j) != 0 {
			switch x.Rep[j] {
			case ExtGranted:
				g++
			case ExtRefused:
				r++
			}
		}
	}
	return g >= Majority || r > N-Majority || mask == 1<<N-1
}

// extStart: holder ci begins an extension of TTL extTTL(b).
func (s sys) extStart(ci, b int, log *[]string) {
	c := &s.Clients[ci]
	x := &c.Ext
	k := x.N
	x.N++
	x.Running, x.Start, x.TTL[k] = true, s.Now, uint8(s.extTTL(b))
	if s.rules.UnheardTTLs && s.rules.UnheardAtStart {
		for j := range N {
			x.Cut[j] = uint8(s.unheardTTL(x, int(k), j, 0))
		}
	}
	s.forgetRan(c)
	for j := range x.Call[k] {
		x.Call[k][j] = MsgSent
	}
	pulled := ""
	if end := int(s.Now) + int(x.TTL[k]); s.rules.PullAtStart && end < int(c.Until) {
		c.Until, pulled = int16(end), ", pulled back"
	}
	if log != nil {
		s.logf(log, "c%d starts extension %d for %d ticks (valid until t=%d%s)", ci, k+1, x.TTL[k], c.Until, pulled)
	}
}

// extExec: node j runs client ci's call of extension k (kj = k*N + j).
func (s sys) extExec(ci, kj int, log *[]string) {
	k, j := kj/N, kj%N
	c := &s.Clients[ci]
	x := &c.Ext
	ok, id := s.Nodes[j].Extend(s.nodeNow(j), c.value(ci), int(x.TTL[k]))
	rep := int8(ExtRefused)
	if ok {
		rep = ExtGranted
		if id < 0 {
			rep = ExtNoID
		}
	}
	late := !x.Running || k != int(x.N)-1
	if late {
		x.Call[k][j] = s.unheard(c, k)
	} else {
		x.Call[k][j], x.Rep[j] = MsgReplied, rep
	}
	if log != nil {
		s.logf(log, "c%d extend %d (%d ticks)->n%d runs: %s%s", ci, k+1, x.TTL[k], j, extReply(rep, int(s.Nodes[j].Expiry)), lateNote(late))
	}
}

// extReply: exp >= 0 is the key's expiry after the call ran.
func extReply(rep int8, exp int) string {
	switch rep {
	case ExtGranted:
		if exp < 0 {
			return "extended"
		}
		return "extended, key expires at t=" + itoa(exp)
	case ExtNoID:
		return "extended, but no id: not counted"
	}
	return "refused"
}

// extDecide: holder ci receives the running extension's replies mask and
// decides.
func (s sys) extDecide(ci int, mask uint8, log *[]string) {
	c := &s.Clients[ci]
	x := &c.Ext
	k := int(x.N) - 1
	ttl := int(x.TTL[k])
	var kept [N]int // the granted nodes' TTLs, longest first
	g := 0
	for j := range N {
		if mask&(1<<j) == 0 {
			continue
		}
		if x.Rep[j] == ExtGranted {
			kept[g] = s.keptTTL(x, k, j)
			g++
		}
		if log != nil {
			s.logf(log, "c%d <- n%d extend %d: %s", ci, j, k+1, extReply(x.Rep[j], -1))
		}
	}
	s.endExtension(ci, mask)
	if g < Majority {
		s.extFailed(ci, "lost", log)
		return
	}
	slices.Sort(kept[:g])
	slices.Reverse(kept[:g])
	eff := kept[Majority-1] // what a majority keeps at least
	until := int(x.Start) + eff
	if until <= int(s.Now) {
		s.extFailed(ci, "no validity left", log)
		return
	}
	c.Until = int16(until)
	if log != nil {
		s.logf(log, "c%d extended (TTL %d, counted %d): valid until t=%d", ci, ttl, eff, c.Until)
	}
}

// extGiveUp: holder ci stops waiting for its extension (a deadline): it
// fails.
func (s sys) extGiveUp(ci int, log *[]string) {
	s.endExtension(ci, 0)
	s.extFailed(ci, "timed out", log)
}

// endExtension ends the running extension's round: the replies in mask
// were heard, those not in it are unheard.
func (s sys) endExtension(ci int, mask uint8) {
	c := &s.Clients[ci]
	x := &c.Ext
	k := int(x.N) - 1
	for j := range N {
		if x.Call[k][j] == MsgReplied {
			x.Call[k][j] = MsgNone
			if mask&(1<<j) == 0 {
				x.Call[k][j] = s.unheard(c, k)
			}
		}
		x.Rep[j], x.Cut[j] = 0, 0
	}
	x.Running = false
	s.forgetRan(c)
}

// extFailed: the extension failed; a shortening pulls the validity back
// (PullDeadline), which may end the hold at once.
func (s sys) extFailed(ci int, why string, log *[]string) {
	c := &s.Clients[ci]
	x := &c.Ext
	pull := int(x.Start) + int(x.TTL[x.N-1])
	if log != nil {
		s.logf(log, "c%d extension %d fails (%s)", ci, x.N, why)
	}
	if !s.rules.PullDeadline || pull >= int(c.Until) {
		return
	}
	c.Until = int16(pull)
	c.expire(int(s.Now))
	if log != nil {
		if c.Phase == Holding {
			s.logf(log, "c%d pulls its validity back to t=%d", ci, pull)
		} else {
			s.logf(log, "c%d pulls its validity back to t=%d: it no longer holds the lock", ci, pull)
		}
	}
}

// abandon: the hold ended; the calls not yet run may still run, and
// nothing depends on the others.
func (x *extState) abandon() {
	x.Running, x.Start, x.Rep, x.Cut = false, 0, [N]int8{}, [N]uint8{}
	for k := range x.Call {
		for j := range x.Call[k] {
			if x.Call[k][j] != MsgSent {
				x.Call[k][j] = MsgNone
			}
		}
	}
}

// encode appends the extensions' canonical encoding.
func (x *extState) encode(b []byte) []byte {
	b = append(b, x.N, bit(x.Running))
	if x.Running {
		b = p16(b, int(x.Start))
	}
	for k := range x.Call {
		used := x.Running && k == int(x.N)-1
		for j := range N {
			used = used || x.Call[k][j] != MsgNone
		}
		ttl := uint8(0)
		if used {
			ttl = x.TTL[k]
		}
		b = append(b, ttl, x.Call[k][0], x.Call[k][1], x.Call[k][2])
	}
	b = append(b, byte(x.Rep[0]), byte(x.Rep[1]), byte(x.Rep[2]))
	return append(b, x.Cut[0], x.Cut[1], x.Cut[2])
}
