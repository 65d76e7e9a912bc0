package round

import (
	"errors"
	"time"
)

// Tally counts the replies of one round. Its fields are the round's to
// write and its caller's to read once the round has returned.
type Tally struct {
	N, Majority int
	Replied     int // nodes with a recorded outcome, heard from or given up on
	Counts      [NumOutcomes]int
	Results     []NodeResult
	recorded    []bool // the node has an outcome (a reply, or given up on)
	Heard       []bool // a reply actually arrived from this node
	Answered    int    // replies that came from the node itself, not a skip or timeout
	LastReply   time.Time
	Slowest     time.Duration
	Best        int64 // the largest value any node replied with
	quorum      int   // answers that end the round's patience (Spec.Quorum)
}

func NewTally(n int) *Tally {
	flags := make([]bool, 2*n)
	t := &Tally{N: n, Majority: Majority(n), quorum: Majority(n), Results: make([]NodeResult, n),
		recorded: flags[:n:n], Heard: flags[n:]}
	for i := range t.Results {
		t.Results[i].Node = i
	}
	return t
}

func (t *Tally) record(node int, o Outcome, err error, latency time.Duration) {
	if t.recorded[node] {
		return // a late reply from a node already given up on
	}
	t.recorded[node] = true
	t.Replied++
	t.Counts[o]++
	t.Results[node] = NodeResult{Node: node, Outcome: o, Err: err, Latency: latency}
}

func (t *Tally) add(r Reply) {
	if !t.recorded[r.Node] {
		t.Heard[r.Node] = true
		if r.Sent && r.Outcome != NodeTimedOut {
			t.Answered++
		}
		t.LastReply = time.Now()
		t.Slowest = max(t.Slowest, r.Latency)
		t.Best = max(t.Best, r.Value)
	}
	t.record(r.Node, r.Outcome, r.Err, r.Latency)
}

// timeOut gives up on every node that has not answered by the node
// timeout: NodeTimedOut, or NodeFailed with the cause where unreachable
// knows why the node cannot be reached.
func (t *Tally) timeOut(timeout time.Duration, unreachable func(int) error) {
	for i := range t.Results {
		if t.recorded[i] {
			continue
		}
		if err := unreachable(i); err != nil {
			t.record(i, NodeFailed, err, timeout)
		} else {
			t.record(i, NodeTimedOut, ErrNodeTimeout, timeout)
		}
	}
}

// CutShort gives up on every node that has not answered when the caller's
// ctx ended (err) before the round was decided: NodeFailed with the cause
// where unreachable knows why the node cannot be reached, else
// NodeTimedOut with an Err that wraps err and, as its Latency, waited: how
// long the round had run. So the error still names every node's cause,
// and whether a node was silent for longer than a node timeout.
func (t *Tally) CutShort(err error, unreachable func(int) error, waited time.Duration) {
	silent := &noAnswerError{err}
	for i := range t.Results {
		if t.recorded[i] {
			continue
		}
		if cause := unreachable(i); cause != nil {
			t.record(i, NodeFailed, cause, 0)
		} else {
			t.record(i, NodeTimedOut, silent, waited) // silent for as long as the round ran
		}
	}
}

// cutBy reports whether ctx's error ctxErr (nil if ctx has not ended) ended
// a node's call before it answered.
func (t *Tally) cutBy(ctxErr error) bool {
	if ctxErr == nil {
		return false
	}
	for _, r := range t.Results {
		if r.Outcome == NodeTimedOut && errors.Is(r.Err, ctxErr) {
			return true
		}
	}
	return false
}

// noAnswerError is the Err of a node that had not answered when the
// caller's ctx ended.
type noAnswerError struct{ ctxErr error }

func (e *noAnswerError) Error() string {
	return "redlock: no answer before the caller's context ended: " + e.ctxErr.Error()
}

func (e *noAnswerError) Unwrap() error { return e.ctxErr }

// stopWaiting gives up on the silent nodes before their timeout: they keep
// NodeNoReply.
func (t *Tally) stopWaiting() {
	for i := range t.Results {
		t.record(i, NodeNoReply, nil, 0)
	}
}

func (t *Tally) Granted() int { return t.Counts[NodeGranted] }

// Won: a majority granted.
func (t *Tally) Won() bool { return t.Granted() >= t.Majority }

// Lost: a majority can no longer grant, whatever the silent nodes answer.
func (t *Tally) Lost() bool { return t.Granted()+(t.N-t.Replied) < t.Majority }

func (t *Tally) Decided() bool { return t.Won() || t.Lost() }

// RefusedByMajority: so many nodes said no that this owner cannot hold a
// majority, whatever the others would say.
func (t *Tally) RefusedByMajority() bool { return t.Counts[NodeRefused] > t.N-t.Majority }

// WonOrRefused decides an Extend or an Unlock: a majority did it, or can
// no longer do it because it said no.
func (t *Tally) WonOrRefused() bool { return t.Won() || t.RefusedByMajority() }

// Snapshot copies the results, so that late replies do not race with a
// caller that keeps them.
func (t *Tally) Snapshot() []NodeResult { return append([]NodeResult(nil), t.Results...) }

// Widen gives t the results of w, the same round sent again to the nodes
// of sent: t then counts each of those nodes by its answer to w, or by its
// answer to t's round if w was decided without it (a node that failed or
// timed out there still says so).
func (t *Tally) Widen(w *Tally, sent []bool) {
	for i, r := range w.Results {
		switch {
		case !sent[i] || !w.recorded[i] && t.recorded[i]:
			continue
		case !w.recorded[i]:
			r = NodeResult{Node: i} // neither round heard from it
		}
		t.set(i, r)
		t.Heard[i] = w.Heard[i]
	}
	t.Answered += w.Answered
	if w.LastReply.After(t.LastReply) {
		t.LastReply = w.LastReply
	}
	t.Slowest = max(t.Slowest, w.Slowest)
	t.Best = max(t.Best, w.Best)
}

// NotAsked makes the nodes outside asked, which a round sent only to the
// nodes of asked skipped, NodeNoReply: the round was decided without them,
// which a skip as hung would misreport.
func (t *Tally) NotAsked(asked []bool) {
	for i := range t.Results {
		if !asked[i] {
			t.set(i, NodeResult{Node: i})
			t.Heard[i] = false
		}
	}
}

// set makes r node i's result, recorded or not before.
func (t *Tally) set(i int, r NodeResult) {
	if t.recorded[i] {
		t.Counts[t.Results[i].Outcome]--
	} else {
		t.recorded[i] = true
		t.Replied++
	}
	t.Counts[r.Outcome]++
	t.Results[i] = r
}
