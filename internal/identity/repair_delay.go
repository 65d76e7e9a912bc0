package identity

import (
	"sync"
	"time"
)

// The delayed restart (docs/fencing.md, "Repair"). A node that lost lock
// keys must not count again before every lock it may have held has expired.
// The delay runs from the node's lost stamp, which the first script to find
// the node not intact writes (identity.lua), never from the node's uptime:
// a node emptied while running (FLUSHALL, a mistaken DEL) has a long uptime
// and lost its keys just now, and uptime is whole seconds besides.
//
// Two clocks must agree that the delay has passed: the node's (its time
// now against the stamp's) and the repairer's own monotonic clock, from when
// it first saw that same stamp. A node clock that jumps forward therefore
// cannot shorten the delay; one that jumps back lengthens it by the jump.

// stampWatch remembers, per node, the lost stamp this client saw last and
// when it first saw it.
type stampWatch struct {
	mu   sync.Mutex
	seen []seenStamp
}

type seenStamp struct {
	stamp string
	at    time.Time
}

func newStampWatch(n int) stampWatch { return stampWatch{seen: make([]seenStamp, n)} }

// firstSeen records that node i holds stamp at now, and returns when this
// client first saw that stamp (now, for a stamp it had not seen).
func (w *stampWatch) firstSeen(i int, stamp string, now time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[i].stamp != stamp {
		w.seen[i] = seenStamp{stamp: stamp, at: now}
	}
	return w.seen[i].at
}

// restartDelay is how much longer node i (state s, read by a read that
// began at begun on this client's clock) must stay out, given the longest
// TTL in use. The counters a repair writes come from that same read, so
// the read itself must begin after the delay: begun, not the time now,
// is measured against the first sighting.
func (d *Deployment) restartDelay(i int, s *nodeState, begun time.Time, longest time.Duration) time.Duration {
	if s.stamp == "" {
		// Not stamped: a read-only node, say, which no repair writes to.
		return longest
	}
	byNode := time.Duration(s.now-s.lostAt) * time.Millisecond
	bySelf := begun.Sub(d.stamps.firstSeen(i, s.stamp, d.cfg.Clock.Now()))
	return max(longest-byNode, longest-max(bySelf, 0), 0)
}
