package chaos

import (
	"fmt"
	"math"
	"slices"
)

// tokenGapsWhy is why tokens jump: each is a node's counter times 256 plus
// the node's id, and the counter (G, one per node for every lock name)
// moves on every acquisition attempt that reaches the node, granted or
// refused (lua/fenced_acquire.lua). Waiters retrying while a lock is held
// take counters: tokens are ordered and unique, not consecutive.
const tokenGapsWhy = "a token is counter*256 + node id, and every acquisition attempt, refused ones included, " +
	"takes a counter on each node it reaches, so waiters retrying while the lock is held widen the gaps"

// tokenSummary describes a fenced run's tokens: how many, their range,
// and the gaps between successive ones in counter steps. "" without
// fencing (no tokens).
func tokenSummary(h *History) string {
	if !h.Fenced || len(h.Holds) == 0 {
		return ""
	}
	tokens := make([]uint64, 0, len(h.Holds))
	for _, x := range h.Holds {
		tokens = append(tokens, x.Token)
	}
	slices.Sort(tokens)
	if len(tokens) == 1 {
		return fmt.Sprintf("tokens: 1 granted, %d (%s)", tokens[0], tokenGapsWhy)
	}
	gaps := make([]uint64, 0, len(tokens)-1)
	for i := 1; i < len(tokens); i++ {
		gaps = append(gaps, tokens[i]-tokens[i-1])
	}
	slices.Sort(gaps)
	steps := func(g uint64) int64 { return int64(math.Round(float64(g) / 256)) }
	lo, hi, med := gaps[0], gaps[len(gaps)-1], gaps[len(gaps)/2]
	return fmt.Sprintf("tokens: %d granted, %d to %d; successive tokens differ by %d to %d (median %d), "+
		"about %d to %d counter steps (%s)", len(tokens), tokens[0], tokens[len(tokens)-1], lo, hi, med,
		steps(lo), steps(hi), tokenGapsWhy)
}
