package chaos

import (
	"fmt"
	"strings"
	"time"
)

// refusals is the evidence of the fence at work: each operation the store
// refused (a few), with the holder that sent it and the holder of the
// higher token it was refused against. The counts alone (StaleRejected)
// do not show that the refused operation was the paused holder's, which is
// the point of the client-pause run.
func refusals(h *History) []Violation {
	byToken := map[uint64]*Hold{}
	for i := range h.Holds {
		byToken[h.Holds[i].Token] = &h.Holds[i]
	}
	var out []Violation
	for i := range h.Holds {
		x := &h.Holds[i]
		for _, op := range []struct {
			name string
			op   *Op
		}{{"read", x.Read}, {"write", x.Write}} {
			if op.op == nil || !op.op.Refused || len(out) == evidencePerCheck {
				continue
			}
			out = append(out, Violation{CheckStaleRefused, refusal(x, op.name, op.op, byToken[op.op.Highest])})
		}
	}
	return out
}

// refusal says who sent the refused operation, when, and against what.
func refusal(x *Hold, name string, op *Op, newer *Hold) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker %d's %s (token %d, granted at %v", x.Worker, name, x.Token, x.Grant.Round(time.Millisecond))
	if x.Paused > 0 {
		fmt.Fprintf(&b, ", paused %v", x.Paused.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, ") refused at %v: ", op.Start.Round(time.Millisecond))
	switch {
	case op.Highest == 0:
		b.WriteString(op.Err)
	case newer != nil:
		fmt.Fprintf(&b, "the store had already admitted token %d (worker %d's, granted at %v)",
			op.Highest, newer.Worker, newer.Grant.Round(time.Millisecond))
	default:
		fmt.Fprintf(&b, "the store had already admitted token %d", op.Highest)
	}
	switch {
	case name == "write":
		b.WriteString("; nothing was written")
	case x.Write == nil: // the workload writes only after an admitted read
		fmt.Fprintf(&b, "; worker %d never wrote", x.Worker)
	}
	return b.String()
}
