package protomodel

// Unheard calls (internal/lease/unheard.go). The library records an
// extension call as heard when it returns with the node's answer, whether
// or not its round counted it (the calls go on after the round is
// decided, up to the round's patience), and never forgets one that did not
// return. So in the model a call is heard with its round's decision if the
// reply was delivered then; a call that ran but whose reply was not
// delivered (late, or a round given up) is MsgRan, and may be heard at any
// later time (EvExtHear), or never.
//
// The library cuts each granted node to the shortest TTL unheard there
// when the extension is decided (UnheardTTLs). A call heard while the
// extension runs may have run on its node after the granted call, and cut
// it all the same: UnheardAtStart cuts by the calls unheard when the
// extension began instead (those heard before it began ran before it).

// unheard is the state of extension k's call that ran and whose reply the
// client has not heard: MsgRan while it may cut a later extension, else
// MsgNone (nothing depends on it).
func (s sys) unheard(c *Client, k int) uint8 {
	if s.ranMatters(c) && (int(c.Ext.TTL[k]) < s.cfg.TTL || s.cfg.NoReduction) {
		return MsgRan
	}
	return MsgNone
}

// ranMatters: what client c has not heard may still change what it
// decides: while it holds the lock, an extension that has not begun
// (UnheardAtStart: its start reads them) or has not been decided (else:
// its decision reads them).
//
// Reductions, exact (off with NoReduction): an unheard call is kept
// (MsgRan) only while it matters and if its TTL is below the lock's (the
// longest: it cuts nothing), and heard (EvExtHear) only where the next
// read is to come, before an extension begins (UnheardAtStart) or while
// one runs (else): it is heard, or not, by the time of that read, and
// hearing it earlier changes nothing else.
func (s sys) ranMatters(c *Client) bool {
	x := &c.Ext
	if c.Phase != Holding || !s.rules.UnheardTTLs {
		return false
	}
	return int(x.N) < s.cfg.Extends || x.Running && !s.rules.UnheardAtStart || s.cfg.NoReduction
}

// forgetRan forgets client c's unheard calls once they no longer matter.
func (s sys) forgetRan(c *Client) {
	if s.ranMatters(c) {
		return
	}
	for k := range c.Ext.Call {
		for j := range N {
			if c.Ext.Call[k][j] == MsgRan {
				c.Ext.Call[k][j] = MsgNone
			}
		}
	}
}

// extHear: client ci hears, late, the reply of extension k's call that
// ran on node j.
func (s sys) extHear(ci, kj int, log *[]string) {
	s.Clients[ci].Ext.Call[kj/N][kj%N] = MsgNone
	if log != nil {
		s.logf(log, "c%d hears n%d's late reply to extension %d", ci, kj%N, kj/N+1)
	}
}

// keptTTL is how long granted node j keeps extension k's TTL for certain:
// its TTL, cut (UnheardTTLs) to the shortest of the client's other calls
// to j not heard of (not run, or run and unheard), now or (UnheardAtStart)
// when the extension began.
func (s sys) keptTTL(x *extState, k, j int) int {
	ttl := int(x.TTL[k])
	switch {
	case !s.rules.UnheardTTLs:
		return ttl
	case s.rules.UnheardAtStart:
		if x.Cut[j] > 0 {
			return min(ttl, int(x.Cut[j]))
		}
		return ttl
	}
	return s.unheardTTL(x, k, j, ttl)
}

// unheardTTL is the shortest TTL of the client's calls to node j, other
// than extension k's, not heard of: min with ttl (0: none).
func (s sys) unheardTTL(x *extState, k, j, ttl int) int {
	for k2 := range int(x.N) {
		if st := x.Call[k2][j]; k2 != k && (st == MsgSent || st == MsgRan) && (ttl == 0 || int(x.TTL[k2]) < ttl) {
			ttl = int(x.TTL[k2])
		}
	}
	return ttl
}
