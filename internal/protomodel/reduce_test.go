package protomodel

import "testing"

// The exact reductions (the eager round-1 decision, the dropped no-op
// releases, the unheard calls kept and heard only where they matter)
// change how many states are searched, never what is found: with and
// without them, each search finds a violation of the same property, or
// none.
func TestReductionsChangeNoVerdict(t *testing.T) {
	skipUnderRace(t)
	oneClient := Config{Clients: 1, Attempts: 2, Unlock: true, Timeouts: true, Repairers: 1, Wipes: 1,
		WipeNoRestart: true, WipeNodes: n1, RepairNodes: n1, TTL: 1, MaxTime: 1, DFS: true}
	for _, c := range []struct {
		name  string
		cfg   Config
		rules Rules
	}{
		{"item 1", item1Old, Old},
		{"item 1", item1Old, New},
		{"one client, two attempts", oneClient, New},
		// The unheard calls' reductions (unheard.go): what each broken
		// rule finds. The fixed rules' full search is the deep run's.
		{"extensions", extendGround, NewNoUnheard},
		{"extensions", extendGround, NewUnheardAtEnd},
	} {
		reduced := search(t, c.name, c.cfg, c.rules)
		full := c.cfg
		full.NoReduction = true
		all := search(t, c.name+", no reduction", full, c.rules)
		rv, av := "none", "none"
		if reduced.Violation != nil {
			rv = reduced.Violation.Prop
		}
		if all.Violation != nil {
			av = all.Violation.Prop
		}
		if rv != av {
			t.Errorf("%s, %s: reduced search finds %s, full search %s", c.name, c.rules.Name, rv, av)
		}
	}
}
