package protomodel

import "fmt"

// A client's lock attempts (internal/lease: acquire.go, fencing.go), and a
// holder's extensions (extend.go). A call to a node is
// sent with its round, runs on the node as one event, and its reply reaches
// the client later: the client's decision, one event that takes the replies
// it received by then (decide.go). Any other event may come between the
// runs and the decision, so a client is paused wherever it waits. A call
// not yet run when its round is decided may run late: a paused node applies
// a buffered call when it resumes.

// Phase of a client.
const (
	Idle    = iota // no attempt running
	Round1         // acquisition sent to every node, waiting for a decided tally
	Round2         // commit of Best sent to every node
	Holding        // succeeded; valid until Until (Start+TTL, or what an Extend set)
)

// Per-node state of one call.
const (
	MsgNone    = iota // not sent, or dropped with its attempt
	MsgSent           // sent, not yet run by the node
	MsgReplied        // run; the reply has not reached the client
	MsgDone           // reply delivered, or run after the round was decided
	MsgRan            // an extension call that ran, whose reply the client has not heard (extend.go)
)

// Client is one client's current attempt.
type Client struct {
	Phase    uint8
	Attempts uint8 // attempts started
	Start    int16 // global time when the attempt began
	Until    int16 // while Holding: global time when the validity ends
	Best     int32 // the token, once round 1 is won
	Floor    int32 // M1: largest token returned before this attempt began

	Acq     [N]uint8 // round-1 call per node
	AcqSt   [N]int8  // its reply, while MsgReplied
	AcqCand [N]int32
	Com     [N]uint8 // round-2 call per node
	ComRep  [N]int32 // its reply, while MsgReplied
	Rel     [N]bool  // release queued: runs once the round-1 call has run

	Ext extState // the holder's extensions (extend.go)
}

// value is the lock value of client c's current attempt.
func (c *Client) value(ci int) uint8 { return uint8(ci*16 + int(c.Attempts)) }

// startAttempt: the client begins an attempt (TryLock) and sends round 1 to
// every node. Calls of its previous attempt still in flight are dropped
// (lost in the network): a model limit, not a property of the code.
func (s sys) startAttempt(ci int, log *[]string) {
	c := &s.Clients[ci]
	*c = Client{Phase: Round1, Attempts: c.Attempts + 1, Start: s.Now, Floor: s.MaxReturned}
	for j := range c.Acq {
		c.Acq[j] = MsgSent
	}
	if log != nil {
		s.logf(log, "c%d starts attempt %d (value %d), M1 floor %d", ci, c.Attempts, c.value(ci), c.Floor)
	}
}

// acqExec: node j runs client ci's round-1 call.
func (s sys) acqExec(ci, j int, log *[]string) {
	c := &s.Clients[ci]
	st, cand := s.Nodes[j].Acquire(s.nodeNow(j), c.value(ci), s.cfg.TTL)
	c.Acq[j] = MsgDone
	if c.Phase == Round1 {
		c.Acq[j] = MsgReplied
		c.AcqSt[j], c.AcqCand[j] = int8(st), cand
	}
	if log != nil {
		s.logf(log, "c%d acquire->n%d runs: %s cand=%d%s", ci, j, acqStatus(st), cand, lateNote(c.Phase != Round1))
	}
}

func acqStatus(st int) string {
	switch st {
	case AcqGranted:
		return "granted"
	case AcqRefused:
		return "refused"
	}
	return fmt.Sprintf("AMNESIA(%d, node stamped)", st)
}

func lateNote(late bool) string {
	if late {
		return " (late: its round is over)"
	}
	return ""
}

// decide1: client ci receives the round-1 replies mask and decides: won on
// a majority of grants (token = the largest candidate delivered, granted
// or not: tally.best), else lost.
func (s sys) decide1(ci int, mask uint8, log *[]string) {
	c := &s.Clients[ci]
	g := 0
	for j := 0; j < N; j++ {
		if mask&(1<<j) != 0 {
			if log != nil {
				s.logf(log, "c%d <- n%d round 1: %s cand=%d", ci, j, acqStatus(int(c.AcqSt[j])), c.AcqCand[j])
			}
			if c.AcqSt[j] == AcqGranted {
				g++
			}
			c.Best = max(c.Best, c.AcqCand[j])
		}
	}
	c.dropReplies()
	if g < Majority {
		s.fail(ci, "round 1 lost", log)
		return
	}
	c.Phase = Round2
	for k := range c.Com {
		c.Com[k] = MsgSent
	}
	if log != nil {
		s.logf(log, "c%d won round 1: commits token %d on every node", ci, c.Best)
	}
}

// comExec: node j runs client ci's commit.
func (s sys) comExec(ci, j int, log *[]string) {
	c := &s.Clients[ci]
	h := s.Nodes[j].Commit(s.nodeNow(j), c.Best)
	c.Com[j] = MsgDone
	if c.Phase == Round2 {
		c.Com[j], c.ComRep[j] = MsgReplied, h
	}
	if log != nil {
		s.logf(log, "c%d commit(%d)->n%d runs: reply %d%s", ci, c.Best, j, h, lateNote(c.Phase != Round2))
	}
}

// decide2: client ci receives the commit replies mask and decides. A reply
// above the token aborts (commitRound); a majority of commits ends round 2,
// and the attempt succeeds if it is still valid: now < start + TTL (grant).
func (s sys) decide2(ci int, mask uint8, log *[]string) (eff Effect) {
	c := &s.Clients[ci]
	g, abort := 0, false
	for j := 0; j < N; j++ {
		if mask&(1<<j) != 0 {
			h := c.ComRep[j]
			if log != nil {
				s.logf(log, "c%d <- n%d commit: %d", ci, j, h)
			}
			switch {
			case h > c.Best:
				abort = true
			case h >= 0:
				g++
			}
		}
	}
	c.dropReplies()
	switch {
	case abort:
		s.fail(ci, "superseded: a reply above its token", log)
	case g >= Majority && (int(s.Now) < int(c.Start)+s.cfg.TTL || s.cfg.NoValidityCheck):
		c.Phase, c.Until = Holding, c.Start+int16(s.cfg.TTL)
		if log != nil {
			s.logf(log, "c%d HOLDS the lock with token %d, valid until t=%d", ci, c.Best, c.Until)
		}
		eff = Effect{Success: true, Client: int8(ci), Token: c.Best, Floor: c.Floor}
		c.Floor = 0 // checked once, by the properties
	case g >= Majority:
		s.fail(ci, "no validity left", log)
	default:
		s.fail(ci, "round 2 lost", log)
	}
	return eff
}

// giveUp: the client stops waiting for the nodes that have not answered
// (node timeout); the round is lost.
func (s sys) giveUp(ci int, log *[]string) {
	s.fail(ci, "timed out", log)
}

// fail abandons the attempt: release everywhere (abandon, afterAcquire).
func (s sys) fail(ci int, why string, log *[]string) {
	c := &s.Clients[ci]
	c.dropReplies()
	c.Phase, c.Floor, c.Start = Idle, 0, 0 // Best stays: late commits carry it
	for j := range c.Rel {
		c.Rel[j] = true
	}
	if log != nil {
		s.logf(log, "c%d attempt fails (%s): releases on every node", ci, why)
	}
}

// unlock: the holder releases on every node.
func (s sys) unlock(ci int, log *[]string) {
	c := &s.Clients[ci]
	c.endHold()
	for j := range c.Rel {
		c.Rel[j] = true
	}
	if log != nil {
		s.logf(log, "c%d unlocks: releases on every node", ci)
	}
}

// relExec: node j runs client ci's release (after its round-1 call ran).
func (s sys) relExec(ci, j int, log *[]string) {
	c := &s.Clients[ci]
	c.Rel[j] = false
	del := s.Nodes[j].Release(s.nodeNow(j), c.value(ci))
	if log != nil {
		s.logf(log, "c%d release->n%d runs: deleted %d", ci, j, del)
	}
}

// dropReplies forgets replies not yet delivered once a round is decided.
func (c *Client) dropReplies() {
	for j := range c.Acq {
		if c.Acq[j] == MsgReplied {
			c.Acq[j], c.AcqSt[j], c.AcqCand[j] = MsgDone, 0, 0
		}
		if c.Com[j] == MsgReplied {
			c.Com[j], c.ComRep[j] = MsgDone, 0
		}
	}
}

// expire ends a hold whose validity passed: the client no longer holds the
// lock (its keys expire by themselves).
func (c *Client) expire(now int) {
	if c.Phase == Holding && now >= int(c.Until) {
		c.endHold()
	}
}

// endHold: the client no longer holds the lock (unlocked, or its validity
// passed). An extension running is abandoned: its calls not yet run may
// still run late.
func (c *Client) endHold() {
	c.Phase, c.Start, c.Until = Idle, 0, 0
	c.Ext.abandon()
}

// dropNoOpReleases forgets queued releases that can no longer delete
// anything: the round-1 call to that node has run, and the node's key does
// not hold the attempt's value (refused, expired, deleted or wiped). Only
// that call could ever set the value there, so the release would be a
// no-op whenever it ran: dropping it changes no behaviour, and saves the
// states that differ only by it.
func (s sys) dropNoOpReleases() {
	if s.cfg.NoReduction {
		return
	}
	for ci := range s.Clients[:s.cfg.Clients] {
		c := &s.Clients[ci]
		for j := range c.Rel {
			if c.Rel[j] && c.Acq[j] != MsgSent && s.Nodes[j].lockHeldBy(s.nodeNow(j)) != c.value(ci) {
				c.Rel[j] = false
			}
		}
	}
}
