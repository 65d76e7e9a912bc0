package protomodel

import (
	"fmt"
	"strconv"
)

// Config bounds the search: the environment's events are finite, so is the
// reachable state space.
type Config struct {
	Clients   int // clients making lock attempts, at most MaxClients
	Attempts  int // lock attempts per client (K)
	Repairers int // repair processes (P), at most MaxRepairers
	Wipes     int // wipes in all (W)

	WipeRestart   bool  // wipes that restart the node (its uptime starts again)
	WipeNoRestart bool  // wipes of a running node (FLUSHALL)
	WipeNodes     uint8 // nodes that may be wiped, a bit each; 0: all
	RepairNodes   uint8 // nodes that may be repaired, a bit each; 0: all

	TTL     int // lock TTL in ticks
	MaxTime int // the clock stops here
	// MaxDepth bounds the number of events on a path; 0: none (the whole
	// bounded space).
	MaxDepth int

	// Scenario restrictions, to reach deep counterexamples in a small
	// space: the earliest time a client may begin an attempt, and a
	// repairer begin a repair (and the operator a reprovision).
	ClientsFrom, RepairsFrom int

	Timeouts bool // a client may stop waiting (node timeout): the round is lost
	// NoValidityCheck: clients skip the check after round 2, as a client
	// whose monotonic clock stalled would pass it (the lease is then not
	// worth checking).
	NoValidityCheck bool
	Unlock          bool // a holder may unlock before its validity ends

	// Rollbacks: restarts from the last snapshot of the node's data, at
	// most this many in all; Saves: snapshots, at most this many. Both on
	// the nodes SnapNodes allows, a bit each; 0: those WipeNodes allows.
	Rollbacks, Saves int
	SnapNodes        uint8

	// ClockJump > 0 lets a node's clock jump forward by that many ticks,
	// at most Jumps times in all. Lock keys then expire early, so the lease
	// property is not checked; U and M1 are.
	ClockJump, Jumps int

	// Props are the properties checked (0: all): checking some only finds
	// the violations of those that a shorter one of another would hide.
	Props PropSet

	// MaxStates stops the search with an error (0: no limit).
	MaxStates int

	// DFS searches depth first: far less memory, traces not shortest.
	DFS bool

	// NoReduction explores every interleaving, without the exact
	// reductions (Enabled, State.dropNoOpReleases): to check them.
	NoReduction bool

	// Extends: extensions a holder may start per attempt, at most
	// MaxExtends (extend.go); each applies TTL, or ShortTTL (0: none;
	// below TTL, which stays the longest TTL in use). ExtTimeouts: a
	// holder may stop waiting for an extension (as Timeouts lets every
	// client stop waiting for any round).
	Extends, ShortTTL int
	ExtTimeouts       bool

	// Leaders > 0: only the first Leaders clients extend, and the others
	// begin their attempts at OthersFrom at the earliest (and from
	// ClientsFrom). Scenario restrictions that keep a space small: a
	// client's role is part of its encoding, so their symmetry holds.
	Leaders, OthersFrom int

	// Reprovisions: reprovisions an operator may run, one after another,
	// at most MaxReprovisions (reprovision.go).
	Reprovisions int
}

// Limits of the fixed-size state.
const (
	MaxClients   = 3
	MaxRepairers = 3
	MaxTokens    = 16
)

// State is the whole system: nodes, clients, repairers, the clock, what the
// environment has used of its bounds, and the history the properties need.
type State struct {
	Now     int16
	Nodes   [N]Node
	Clients [MaxClients]Client
	Reps    [MaxRepairers]Repairer
	Prov    Reprovisioner

	Wipes, Jumps, RepairsStarted, Rollbacks, Saves uint8
	Provs                                          uint8 // reprovisions started
	Gen                                            uint8 // reprovisions decided: the deployment's identities are of this generation

	MaxReturned int32            // M1: the largest token any successful attempt returned
	Tokens      [MaxTokens]int32 // U: tokens of successful attempts, in order of success
	NTokens     uint8            //
}

// sys is a state with the bounds and rules it runs under (kept out of
// State, so that the search's queues hold no pointers).
type sys struct {
	*State
	cfg   *Config
	rules *Rules
}

// Initial: all nodes provisioned (ids and uuids 0..N-1), up for long.
func Initial(cfg *Config) State {
	var s State
	for i := range s.Nodes {
		s.Nodes[i] = provisioned(i, int16(-10*cfg.TTL))
	}
	return s
}

// nodeNow is node j's clock.
func (s *State) nodeNow(j int) int { return int(s.Now) + int(s.Nodes[j].Skew) }

func (s *State) logf(log *[]string, format string, args ...any) {
	if log != nil {
		*log = append(*log, fmt.Sprintf("t=%d ", s.Now)+fmt.Sprintf(format, args...))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// tick advances the clock: lock keys and holds that end at the new time
// end.
func (s sys) tick(log *[]string) {
	s.Now++
	for j := range s.Nodes {
		s.Nodes[j].expire(s.nodeNow(j))
	}
	ended := ""
	for ci := range s.Clients[:s.cfg.Clients] {
		c := &s.Clients[ci]
		if log != nil && c.Phase == Holding && int(s.Now) >= int(c.Until) {
			ended += map[bool]string{true: ": c", false: ", c"}[ended == ""] + itoa(ci) + "'s validity ends"
		}
		c.expire(int(s.Now))
	}
	if log != nil {
		s.logf(log, "tick%s", ended)
	}
}

func (s sys) wipe(j int, restart bool, log *[]string) {
	s.Wipes++
	s.Nodes[j].Wipe(s.nodeNow(j), restart)
	how := "while running (no restart)"
	if restart {
		how = "with a restart"
	}
	if log != nil {
		s.logf(log, "n%d WIPED %s: every key lost", j, how)
	}
}

func (s sys) save(j int, log *[]string) {
	s.Saves++
	s.Nodes[j].Save()
	if log != nil {
		s.logf(log, "n%d saves a snapshot of its data (id=%d stamp=%s)", j, s.Nodes[j].ID, stampString(s.Nodes[j].Stamp))
	}
}

func (s sys) rollback(j int, log *[]string) {
	s.Rollbacks++
	s.Nodes[j].Rollback(s.nodeNow(j))
	if log != nil {
		s.logf(log, "n%d RESTARTS FROM ITS SNAPSHOT: run %d, id=%d stamp=%s", j, s.Nodes[j].Run, s.Nodes[j].ID, stampString(s.Nodes[j].Stamp))
	}
}

func (s sys) jump(j int, log *[]string) {
	s.Jumps++
	s.Nodes[j].Skew += int8(s.cfg.ClockJump)
	s.Nodes[j].expire(s.nodeNow(j))
	if log != nil {
		s.logf(log, "n%d's clock jumps forward by %d", j, s.cfg.ClockJump)
	}
}
