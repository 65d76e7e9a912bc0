package protomodel

import "fmt"

// The properties, checked after every event on every path
// (docs/fencing.md, "Properties the tokens must have").

// Property names.
const (
	PropU     = "U"     // no two successful acquisitions return the same token
	PropM1    = "M1"    // A returned before B was invoked => token(B) > token(A)
	PropLease = "Lease" // no two clients hold the lock within their validity
)

// PropSet is a set of properties.
type PropSet uint8

// The properties, as sets.
const (
	CheckU PropSet = 1 << iota
	CheckM1
	CheckLease
)

func (ps PropSet) has(p PropSet) bool { return ps == 0 || ps&p != 0 }

// Violation is a property that failed, and why.
type Violation struct {
	Prop   string
	Detail string
}

func (v *Violation) String() string { return v.Prop + ": " + v.Detail }

// check checks the step that produced s with effect eff, and records a
// success in s's history. It reports the first property that fails.
func (s sys) check(eff Effect) *Violation {
	if eff.Success {
		t := eff.Token
		for _, u := range s.Tokens[:s.NTokens] {
			if u == t && s.cfg.Props.has(CheckU) {
				return &Violation{PropU, fmt.Sprintf("c%d's token %d was already returned to another acquisition", eff.Client, t)}
			}
		}
		if t <= eff.Floor && s.cfg.Props.has(CheckM1) {
			return &Violation{PropM1, fmt.Sprintf("c%d's token %d is not above %d, returned before its attempt began", eff.Client, t, eff.Floor)}
		}
		if int(s.NTokens) == len(s.Tokens) {
			panic("protomodel: more successes than MaxTokens")
		}
		s.Tokens[s.NTokens] = t
		s.NTokens++
		s.MaxReturned = max(s.MaxReturned, t)
	}
	if s.cfg.Props.has(CheckLease) && (s.cfg.ClockJump == 0 || s.cfg.Jumps == 0) {
		first := -1
		for ci := range s.Clients[:s.cfg.Clients] {
			// A hold ends at the tick its validity does (Client.expire).
			if s.Clients[ci].Phase != Holding {
				continue
			}
			if first < 0 {
				first = ci
				continue
			}
			a, b := &s.Clients[first], &s.Clients[ci]
			return &Violation{PropLease, fmt.Sprintf("c%d (token %d, valid until t=%d) and c%d (token %d, valid until t=%d) both hold the lock at t=%d",
				first, a.Best, a.Until, ci, b.Best, b.Until, s.Now)}
		}
	}
	return nil
}
