package round

import (
	"sync/atomic"
)

// nodeHealth tells a hung node from a slow one, so that a paused or hung
// process is not sent call after call that will sit unanswered in its
// socket. go-redis by default waits out its ReadTimeout (seconds) on such a
// call whatever the context says, and a client taking many locks would
// pile up a goroutine and a connection per call, plus the background
// releases of everything it sent there.
//
// The rule (Engine.hung): node i is hung when all of these hold:
//   - it has calls pending;
//   - it has been silent for more than the node timeout: no answer since
//     alive, the time of its last answer or, if it was idle then, of the
//     first call sent since;
//   - a majority of the nodes (N/2+1, not counting node i) answered after
//     node i had already been silent for a node timeout: answered[j] >
//     alive[i] + node timeout for at least N/2+1 nodes j != i.
//
// The last one tells a node that answers nothing while the others answer (a
// paused or hung process) from a saturated client machine or a dial burst,
// where every node is late: a node is not blamed for a silence a majority
// shares, so overload costs
// latency and not availability. A slow node that answers late still
// answers, and keeps being sent calls. Since the others must be a
// majority, at most N - (N/2+1) nodes are hung at once, and a round can
// always reach a majority of the nodes it sends to (hungNodes).
//
// A hung node is still sent one call every probeEvery node timeouts
// (counted from its last answer or probe): a go-redis client configured
// without any read timeout could leave a call pending for ever on a
// connection that died, while a new connection would work. It is well
// again as soon as it answers any call.
type nodeHealth struct {
	pending atomic.Int32 // calls sent and not returned
	// alive is when (Engine.Since) the node last answered, or was sent a call
	// while nothing was pending: the start of its current silence.
	alive    atomic.Int64
	answered atomic.Int64 // when (Engine.Since) the node last answered
	probed   atomic.Int64 // when (Engine.Since) a hung node was last sent a call
}

const probeEvery = 10

// hungNodes returns which nodes a round skips as hung (nil: none). It skips
// none if too few nodes would be left to form a majority: skipping is there
// to spare a round that can succeed without them, and a round that cannot
// had better ask, in case the silence was the client's own after all. A
// majority that is really down then costs each attempt a node timeout and
// calls that pile up until go-redis gives up on them, as without skipping.
func (e *Engine) hungNodes() []bool {
	var hung []bool
	skipped := 0
	for i := range e.health {
		if e.hung(i) {
			if hung == nil {
				hung = make([]bool, len(e.health))
			}
			hung[i] = true
			skipped++
		}
	}
	if len(e.health)-skipped < Majority(len(e.health)) {
		return nil
	}
	return hung
}

// hung applies nodeHealth's rule to node i. A true answer may be a probe's
// ticket: the caller is then to send the call after all.
func (e *Engine) hung(i int) bool {
	h := &e.health[i]
	now, timeout := e.Since(), int64(e.timeout)
	alive := h.alive.Load()
	if h.pending.Load() == 0 || now-alive <= timeout {
		return false
	}
	others, need := 0, Majority(len(e.health))
	for j := range e.health {
		if j != i && e.health[j].answered.Load() > alive+timeout {
			others++
		}
	}
	if others < need {
		return false
	}
	probed := h.probed.Load()
	return now-max(probed, alive) <= probeEvery*timeout || !h.probed.CompareAndSwap(probed, now)
}

func (h *nodeHealth) sending(e *Engine) {
	if h.pending.Add(1) == 1 {
		h.alive.Store(e.Since())
	}
}

// returned records the end of a call. Only a reply proves the node alive: a
// call that ended in a timeout or a broken connection does not.
func (h *nodeHealth) returned(e *Engine, err error) {
	h.pending.Add(-1)
	if err == nil || IsServerReply(err) {
		now := e.Since()
		h.alive.Store(now)
		h.answered.Store(now)
	}
}
