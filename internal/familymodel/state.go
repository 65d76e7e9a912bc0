package familymodel

// Phase of a client's attempt.
type Phase uint8

const (
	Idle    Phase = iota
	Round1        // its acquisition calls are out
	Round2        // its commit calls are out (fenced)
	Holding       // it returned a hold, valid until Until
)

// Calls in flight from a client to a node, a bit each: a call lands when
// the search says (late, after its round was decided, included), never
// after the client's next attempt begins (the library orders a client's
// next call on a node after its own calls there: settle).
const (
	callAcquire uint8 = 1 << iota
	callCommit
	callRelease
)

// Heard of a node in the current round.
const (
	notHeard uint8 = iota
	heardYes
	heardNo      // failed: refused (round 1), amnesiac or down
	heardRefused // round 2: a later token is committed there, which aborts the attempt
)

// Client is one client of the model: its current attempt.
type Client struct {
	Phase  Phase
	Att    uint8 // attempts begun
	Start  uint8 // the tick its attempt began
	Until  uint8 // a hold's validity ends at this tick: Start + TTL - 1
	Slot   uint8 // Sem: the slot it chose
	K, V   uint8 // Sem: the size it knows
	AK, AV uint8 // Sem: the size its attempt carries (a late call too)
	LK, LV uint8 // Sem: a later size a node named this attempt
	Best   uint8 // round 1: the largest candidate heard; then the token
	Began  uint8 // M1: the largest conflicting token returned before its attempt began
	Floor  uint8 // Order: the largest conflicting token a majority held when its round 2 began
	Calls  [MaxNodes]uint8
	Heard  [MaxNodes]uint8
}

// idle ends the client's attempt. What only the attempt read is dropped,
// so that states that differ in it are one (a reduction); the attempt's
// number and its calls still in flight stay, and Slot, for its release.
func (cl *Client) idle() {
	var best uint8
	if cl.Calls != [MaxNodes]uint8{} {
		best = cl.Best // for its commits still in flight
	}
	*cl = Client{Att: cl.Att, Slot: cl.Slot, K: cl.K, V: cl.V, AK: cl.AK, AV: cl.AV, Calls: cl.Calls, Best: best}
}

// Operator is SetPermits (Sem): it reads the versions from a majority,
// writes (Shrink, highest + 1) conditionally, and returns nil once a
// majority stored it.
type Operator struct {
	Phase  uint8 // 0 not begun, 1 reading, 2 writing, 3 returned nil, 4 failed
	V      uint8 // the highest version read, then the version it writes
	At     uint8 // the tick it returned
	Calls  [MaxNodes]bool
	Heard  [MaxNodes]uint8
	Stored [MaxNodes]bool
	// Lapsed: since it returned, fewer than a majority of the nodes kept
	// its write at some moment (a wipe): the guarantee is void from then
	// on, even if a late write restores a majority.
	Lapsed bool
}

// State is the whole system at one moment.
type State struct {
	Now       uint8
	WipesLeft uint8
	Retains   uint8 // retentions left
	Nodes     [MaxNodes]Node
	Clients   [MaxClients]Client
	Op        Operator

	// The largest token returned so far to a hold of each name (a write, a
	// mutex, a multi-lock of its members), and to a read hold; and every
	// token returned, a bit each (U).
	RetW     [MaxNames]uint8
	RetR     uint8
	Returned [4]uint64
}

const majority = MaxNodes/2 + 1

// initial is the state before any event: every node up (fenced: provisioned
// with its identity; Sem: empty), every client idle.
func initial(cfg *Config) State {
	var s State
	s.WipesLeft, s.Retains = uint8(cfg.Wipes), uint8(cfg.Retentions)
	for i := range s.Nodes {
		s.Nodes[i].Up = true
	}
	for c := range cfg.Roles {
		s.Clients[c].K = uint8(cfg.K0)
	}
	return s
}

// names is the names an attempt of client c holds.
func (cfg *Config) names(c int) []int {
	switch cfg.Roles[c] {
	case MultiLock:
		return []int{0, 1}
	case Writer:
		if cfg.Scenario == Multi {
			return []int{int(cfg.Names[c])}
		}
	}
	return []int{0}
}

// conflict: the holds of a and b may not overlap, and their tokens are
// ordered.
func (cfg *Config) conflict(a, b int) bool {
	ra, rb := cfg.Roles[a], cfg.Roles[b]
	switch cfg.Scenario {
	case RW:
		return ra == Writer || rb == Writer
	case Multi:
		for _, x := range cfg.names(a) {
			for _, y := range cfg.names(b) {
				if x == y {
					return true
				}
			}
		}
	}
	return false
}
