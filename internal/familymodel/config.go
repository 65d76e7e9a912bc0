package familymodel

import "errors"

// Fixed sizes: a state is a comparable value, so the search can key a map
// with it.
const (
	MaxNodes   = 3
	MaxClients = 3
	MaxNames   = 2
)

// Scenario is which primitive of the family a model runs.
type Scenario uint8

const (
	// RW: one read-write lock, fenced; Writer and Reader clients.
	RW Scenario = iota
	// Multi: a fenced multi-lock over the names {0, 1} (MultiLock
	// clients) beside locks of one of them (Writer clients: a mutex of
	// Config.Names[c]).
	Multi
	// Sem: a semaphore's slots under its versioned size (Slot clients),
	// and an operator's SetPermits to Config.Shrink.
	Sem
)

func (s Scenario) String() string { return [...]string{"RW", "Multi", "Sem"}[s] }

// Role is what a client acquires.
type Role uint8

const (
	Writer    Role = iota // RW: a write hold; Multi: a mutex of its name
	Reader                // RW: a read hold
	MultiLock             // Multi: the set {0, 1}
	Slot                  // Sem: a permit, on a slot below the size it knows
)

func (r Role) String() string { return [...]string{"writer", "reader", "multi", "slot"}[r] }

// Config bounds a search.
type Config struct {
	Scenario Scenario
	Roles    []Role  // one per client, at most MaxClients
	Names    []uint8 // Multi: the name of each Writer client
	Attempts int     // attempts per client

	TTL     int // the lease's TTL in ticks; a hold is valid for TTL-1 ticks from its start (the drift)
	MaxTime int // the clock stops here

	// Wipes: nodes that lose their data, at most this many in all. A
	// fenced node is then amnesiac until a repair (at least TTL after the
	// wipe, with a majority intact) raises its floor E above every token
	// a majority has seen; a semaphore's node (unfenced) is down for TTL,
	// the delayed restart, and comes back empty.
	Wipes int

	// Timeouts: a client may decide a round before every node answered
	// (a node timeout); the calls not heard stay in flight and land late.
	Timeouts bool
	// NoValidityCheck: clients skip the check after the last round, as a
	// client whose clock stalled would pass it; the lease is then not
	// checked, the tokens are.
	NoValidityCheck bool
	// Unlock: a holder may release before its validity ends.
	Unlock bool
	// Retentions: how many times the retention may pass (H, HR and E
	// expire on every node, R after their last write: a day by default),
	// each at a moment when no client has an attempt under way or a call
	// in flight.
	Retentions int
	// ClientsFrom: the earliest tick a client may begin an attempt (a
	// scenario restriction that keeps a deep counterexample's space small).
	ClientsFrom int

	// Sem: the size the clients start with (K0, version 0) and the one an
	// operator's SetPermits sets (0: none), from ShrinkFrom on.
	K0, Shrink, ShrinkFrom int

	MaxStates int // 0: no limit
}

// Rules are the scripts' rules the model applies; each flag removes one
// (a broken variant, which the search must find broken).
type Rules struct {
	Name string

	ReaderIgnoresWriter  bool // rw_read.lua grants a reader beside a live write hold
	WriterIgnoresReaders bool // rw_write_block.lua grants a write beside live readers
	NoReaderCommitG      bool // rw_read_commit.lua does not raise G to the reader's token
	NoReaderCommitH      bool // rw_read_commit.lua does not compare T with H and E
	NoHRCheck            bool // rw_write_commit.lua does not compare T with HR
	PartialTake          bool // multi_take.lua takes a set's free members where another is held
	MultiCommitFirst     bool // multi_commit.lua compares T with the first member's H only
	AdoptAny             bool // permits.lua adopts a client's size whatever its version
	NoCommitG            bool // commit.lua (a writer's, a mutex's) does not raise G to its token
	NoRepairDelay        bool // a wiped node is repaired (restarted) before a TTL has passed
	NoRepairFloor        bool // a repair leaves E at 0 (G from the others only)
}

// Library is the rules as the scripts have them.
var Library = Rules{Name: "Library"}

// Broken lists the variants, each with one rule removed.
var Broken = []Rules{
	{Name: "ReaderIgnoresWriter", ReaderIgnoresWriter: true},
	{Name: "WriterIgnoresReaders", WriterIgnoresReaders: true},
	{Name: "NoReaderCommitG", NoReaderCommitG: true},
	{Name: "NoReaderCommitH", NoReaderCommitH: true},
	{Name: "NoHRCheck", NoHRCheck: true},
	{Name: "PartialTake", PartialTake: true},
	{Name: "MultiCommitFirst", MultiCommitFirst: true},
	{Name: "AdoptAny", AdoptAny: true},
	{Name: "NoCommitG", NoCommitG: true},
	{Name: "NoRepairDelay", NoRepairDelay: true},
	{Name: "NoRepairFloor", NoRepairFloor: true},
}

func (cfg *Config) validate() error {
	n := len(cfg.Roles)
	switch {
	case n == 0 || n > MaxClients:
		return errors.New("familymodel: 1 to MaxClients clients")
	case cfg.TTL < 2 && !(cfg.TTL == 1 && cfg.NoValidityCheck) || cfg.MaxTime < 1 || cfg.MaxTime > 250 ||
		cfg.Attempts < 1 || cfg.Attempts > 15:
		return errors.New("familymodel: TTL at least 2 (1 without the validity check), MaxTime 1 to 250, Attempts 1 to 15")
	case cfg.TTL > 20 || cfg.Wipes > 3 || cfg.Retentions > 3:
		return errors.New("familymodel: TTL at most 20, Wipes and Retentions at most 3 (the clock and the counters are bytes)")
	case cfg.Scenario == Multi && len(cfg.Names) != n:
		return errors.New("familymodel: Multi needs a name per client")
	case cfg.Scenario == Sem && (cfg.K0 < 1 || cfg.K0 > MaxNames || cfg.Shrink > MaxNames):
		return errors.New("familymodel: Sem needs 1 <= K0 <= MaxNames slots, Shrink <= MaxNames")
	}
	for i, r := range cfg.Roles {
		ok := false
		switch cfg.Scenario {
		case RW:
			ok = r == Writer || r == Reader
		case Multi:
			ok = r == MultiLock || r == Writer && int(cfg.Names[i]) < MaxNames
		case Sem:
			ok = r == Slot
		}
		if !ok {
			return errors.New("familymodel: a role the scenario does not have")
		}
	}
	return nil
}

// fenced: the scenario's acquisitions mint tokens (round 2, the identity).
func (cfg *Config) fenced() bool { return cfg.Scenario != Sem }
