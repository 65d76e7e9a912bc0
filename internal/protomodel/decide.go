package protomodel

// Delivery. A client's decision depends only on which replies of the round
// reached it before the round was decided (tally.decided), not on the order
// they arrived in, and nothing outside the client sees a reply until it
// decides. So instead of one event per delivery, the model has one event per
// decision: the set D of replies delivered by then, any set of replies the
// nodes have returned that could have been the first decided set in some
// delivery order. Replies outside D are late: dropped. This is the same set
// of behaviours as separate deliveries, without the client's partial tallies.

// decided1 reports whether round-1 replies mask are decided: a majority
// granted, or a majority cannot grant (tally.won, tally.lost).
func (c *Client) decided1(mask uint8) bool {
	g, o := 0, 0
	for j := 0; j < N; j++ {
		if mask&(1<<j) != 0 {
			if c.AcqSt[j] == AcqGranted {
				g++
			} else {
				o++
			}
		}
	}
	return g >= Majority || o > N-Majority
}

// decided2 is decided1 for commit replies: a reply above the token aborts.
func (c *Client) decided2(mask uint8) bool {
	g, o := 0, 0
	for j := 0; j < N; j++ {
		if mask&(1<<j) != 0 {
			switch h := c.ComRep[j]; {
			case h == -1:
				o++
			case h > c.Best:
				return true
			default:
				g++
			}
		}
	}
	return g >= Majority || o > N-Majority
}

// firstDecided: mask is decided, and some order of delivering it reaches a
// decision only at its last reply (decidedness only grows with more replies).
func firstDecided(mask uint8, decided func(uint8) bool) bool {
	if !decided(mask) {
		return false
	}
	for j := 0; j < N; j++ {
		if mask&(1<<j) != 0 && !decided(mask&^(1<<j)) {
			return true
		}
	}
	return false
}

// replied is the set of nodes whose reply to the round is waiting.
func replied(slots *[N]uint8) uint8 {
	var m uint8
	for j, st := range slots {
		if st == MsgReplied {
			m |= 1 << j
		}
	}
	return m
}
