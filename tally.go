package redlock

import "time"

// Outcome is what one node answered to one call.
type Outcome uint8

const (
	// NodeNoReply: the operation was decided before this node answered. Its
	// call goes on in the background until the node timeout.
	NodeNoReply Outcome = iota
	// NodeGranted: the node did what was asked (set the lock, extended it,
	// deleted it, committed the token).
	NodeGranted
	// NodeRefused: the node answered no. For a lock, another owner holds the
	// key; for Extend and Unlock, the key no longer holds this owner's value.
	NodeRefused
	// NodeFailed: the call returned an error other than a timeout, or the
	// node could not be reached (its last dial failed, say with "connection
	// refused"). Err says why.
	NodeFailed
	// NodeTimedOut: the node did not answer within the node timeout, or
	// before the caller's ctx ended (its Err then wraps ctx's error).
	NodeTimedOut
	// NodeAmnesiac: the node has lost its fencing state (its node-id marker
	// is gone) and is left out of quorums until it is repaired.
	NodeAmnesiac

	numOutcomes
)

var outcomeNames = [numOutcomes]string{"no reply", "granted", "refused", "failed", "timed out", "amnesiac"}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// NodeResult is one node's part in an operation.
type NodeResult struct {
	Node    int // index into the nodes given to New
	Outcome Outcome
	Err     error         // set for NodeFailed (the node's own error) and NodeTimedOut
	Latency time.Duration // time to the reply; zero for NodeNoReply
}

// majority is the smallest number of nodes any two of which intersect.
func majority(n int) int { return n/2 + 1 }

// tally counts the replies of one round.
type tally struct {
	n, majority int
	replied     int // nodes with a recorded outcome, heard from or given up on
	counts      [numOutcomes]int
	results     []NodeResult
	recorded    []bool // the node has an outcome (a reply, or given up on)
	heard       []bool // a reply actually arrived from this node
	answered    int    // replies that came from the node itself, not a skip or timeout
	lastReply   time.Time
	slowest     time.Duration
	best        int64 // the largest value any node replied with
}

func newTally(n int) *tally {
	flags := make([]bool, 2*n)
	t := &tally{n: n, majority: majority(n), results: make([]NodeResult, n),
		recorded: flags[:n:n], heard: flags[n:]}
	for i := range t.results {
		t.results[i].Node = i
	}
	return t
}

func (t *tally) record(node int, o Outcome, err error, latency time.Duration) {
	if t.recorded[node] {
		return // a late reply from a node already given up on
	}
	t.recorded[node] = true
	t.replied++
	t.counts[o]++
	t.results[node] = NodeResult{Node: node, Outcome: o, Err: err, Latency: latency}
}

func (t *tally) add(r reply) {
	if !t.recorded[r.node] {
		t.heard[r.node] = true
		if r.sent && r.outcome != NodeTimedOut {
			t.answered++
		}
		t.lastReply = time.Now()
		t.slowest = max(t.slowest, r.latency)
		t.best = max(t.best, r.value)
	}
	t.record(r.node, r.outcome, r.err, r.latency)
}

// timeOut gives up on every node that has not answered by the node
// timeout: NodeTimedOut, or NodeFailed with the cause where unreachable
// knows why the node cannot be reached.
func (t *tally) timeOut(timeout time.Duration, unreachable func(int) error) {
	for i := range t.results {
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

// cutShort gives up on every node that has not answered when the caller's
// ctx ended (err) before the round was decided: NodeFailed with the cause
// where unreachable knows why the node cannot be reached, else
// NodeTimedOut with an Err that wraps err. So the error still names every
// node's cause.
func (t *tally) cutShort(err error, unreachable func(int) error) {
	silent := &noAnswerError{err}
	for i := range t.results {
		if t.recorded[i] {
			continue
		}
		if cause := unreachable(i); cause != nil {
			t.record(i, NodeFailed, cause, 0)
		} else {
			t.record(i, NodeTimedOut, silent, 0)
		}
	}
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
func (t *tally) stopWaiting() {
	for i := range t.results {
		t.record(i, NodeNoReply, nil, 0)
	}
}

func (t *tally) granted() int { return t.counts[NodeGranted] }

// won: a majority granted.
func (t *tally) won() bool { return t.granted() >= t.majority }

// lost: a majority can no longer grant, whatever the silent nodes answer.
func (t *tally) lost() bool { return t.granted()+(t.n-t.replied) < t.majority }

func (t *tally) decided() bool { return t.won() || t.lost() }

// refusedByMajority: so many nodes said no that this owner cannot hold a
// majority, whatever the others would say.
func (t *tally) refusedByMajority() bool { return t.counts[NodeRefused] > t.n-t.majority }

// wonOrRefused decides an Extend or an Unlock: a majority did it, or can
// no longer do it because it said no.
func (t *tally) wonOrRefused() bool { return t.won() || t.refusedByMajority() }

// snapshot copies the results, so that late replies do not race with a
// caller that keeps them.
func (t *tally) snapshot() []NodeResult { return append([]NodeResult(nil), t.results...) }
