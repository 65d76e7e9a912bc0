package familymodel

import (
	"fmt"
	"strings"
)

// describe is one line of a trace: the clock, the event, and what it left
// on the node or the client it touched.
func describe(cfg *Config, s *State, e Event) string {
	line := fmt.Sprintf("t=%d %s", s.Now, e)
	switch e.Kind {
	case Land, Wipe, Repair, OpLand:
		line += ": " + s.Nodes[e.N].String()
	case Begin, Decide, Unlock, Expire:
		line += ": " + s.Clients[e.C].String()
	case OpDecide:
		line += fmt.Sprintf(": phase %d, version %d", s.Op.Phase, s.Op.V)
	}
	return line
}

func (n Node) String() string {
	if !n.Up {
		return "down/amnesiac"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "G=%d", n.G)
	if n.E != 0 {
		fmt.Fprintf(&b, " E=%d", n.E)
	}
	for m, k := range n.Key {
		if k.Who != 0 {
			fmt.Fprintf(&b, " key%d=c%d/%d<%d", m, k.Who-1, k.Att, k.Until)
		}
	}
	for c, r := range n.Readers {
		if r.Who != 0 {
			fmt.Fprintf(&b, " reader c%d/%d<%d", c, r.Att, r.Until)
		}
	}
	for m, h := range n.H {
		if h != 0 {
			fmt.Fprintf(&b, " H%d=%d", m, h)
		}
	}
	if n.HR != 0 {
		fmt.Fprintf(&b, " HR=%d", n.HR)
	}
	if n.SizeK != 0 {
		fmt.Fprintf(&b, " size=%d:%d", n.SizeK, n.SizeV)
	}
	return b.String()
}

func (c Client) String() string {
	phase := [...]string{"idle", "round 1", "round 2", "holding"}[c.Phase]
	s := fmt.Sprintf("%s, attempt %d from t=%d", phase, c.Att, c.Start)
	if c.Best != 0 {
		s += fmt.Sprintf(", token %d", c.Best)
	}
	if c.Phase == Holding {
		s += fmt.Sprintf(", valid until t=%d", c.Until)
	}
	if c.K != 0 {
		s += fmt.Sprintf(", slot %d of size %d:%d", c.Slot, c.K, c.V)
	}
	return s
}
