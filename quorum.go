package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	// NodeTimedOut: the node did not answer within the node timeout.
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

// reply is what one per-node goroutine sends back to the collector.
type reply struct {
	node    int
	outcome Outcome
	value   int64 // operation-specific: a fencing candidate or a committed token
	err     error
	latency time.Duration
	sent    bool // the call was sent; false for a node skipped as hung (fanOut)
}

// nodeOp performs one call on node i. It returns the outcome, an
// operation-specific value and, for NodeFailed, the error.
type nodeOp func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error)

// fanOut starts op on every node at once, each call in its own goroutine and
// bounded by the node timeout, and returns the channel on which the replies
// arrive in the order they come (it is buffered for all of them, so nobody
// has to drain it).
//
// If after is not nil, the call on node i starts only once after[i] is
// closed (or is nil); the node timeout runs from then.
//
// A round skips a node i for which sent[i] is false (nil sends to all),
// and, unless after is set (a release of what was sent), the hung nodes
// (hungNodes). The
// reply of a skipped node is NodeTimedOut with ErrNodeHung at once (or
// NodeFailed with the dial error, if the node cannot be reached:
// unreachable); nothing is sent, so nothing has to be undone there either.
//
// After delivering its reply, a goroutine runs then (if not nil) with that
// reply. Work that must follow the call on the same node, such as a
// rollback, goes there: it cannot overtake the call it follows.
//
// The calls run under ctx, so a caller's cancellation reaches clients built
// with ContextTimeoutEnabled; the node timeout bounds them either way.
func (c *Client) fanOut(ctx context.Context, after []chan struct{}, sent []bool, op nodeOp,
	then func(reply)) (<-chan reply, error) {
	replies := make(chan reply, len(c.nodes))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	c.bg.Add(len(c.nodes))
	// The calls of a round start together, so they share one deadline: a
	// context per node was a tenth of an acquisition's allocations. A call
	// that had to wait for its node's previous call gets its own.
	// The calls may run for the patience, not just the node timeout:
	// a call cut at the node timeout on a saturated machine would abort the
	// very dial or write that was about to succeed (go-redis dials under the
	// call's context), and the next attempt would start from scratch.
	r := &round{}
	r.ctx, r.cancel = context.WithTimeout(ctx, c.cfg.patience())
	r.running.Store(int32(len(c.nodes)))
	var hung []bool
	if after == nil {
		hung = c.hungNodes()
	}
	for i, node := range c.nodes {
		go func() {
			defer c.bg.Done()
			rep := c.call(ctx, r, i, node, after, sent, hung != nil && hung[i], op)
			replies <- rep
			if then != nil {
				then(rep)
			}
		}()
	}
	return replies, nil
}

// call is one node's part of a round (fanOut).
func (c *Client) call(ctx context.Context, r *round, i int, node redis.UniversalClient, after []chan struct{},
	sent []bool, hung bool, op nodeOp) reply {
	defer r.callEnded()
	skipped := reply{node: i, outcome: NodeTimedOut, err: ErrNodeHung}
	health := &c.health[i]
	if hung {
		if err := c.unreachable(i); err != nil {
			skipped.outcome, skipped.err = NodeFailed, err
		}
		return skipped
	}
	callCtx := r.ctx
	if after != nil && after[i] != nil {
		select {
		case <-after[i]:
		default:
			<-after[i]
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, c.cfg.patience())
			defer cancel()
		}
	}
	if sent != nil && !sent[i] {
		return skipped
	}
	start := time.Now()
	health.sending(c)
	outcome, value, err := safeOp(op, callCtx, i, node)
	health.returned(c, err)
	if err != nil && (outcome == NodeGranted || outcome == NodeRefused) {
		outcome = NodeFailed
	}
	if outcome == NodeFailed && isTimeout(err) {
		if cause := c.unreachable(i); cause != nil {
			err = cause // go-redis was redialling until the deadline
		} else {
			outcome = NodeTimedOut
		}
	}
	return reply{node: i, outcome: outcome, value: value, err: err, latency: time.Since(start), sent: true}
}

// safeOp runs op, turning a panic into a failed call: a go-redis client
// that was never set up (a zero redis.Client{}) or a UniversalClient of the
// caller's that panics would otherwise kill the process from a goroutine no
// caller can recover in.
func safeOp(op nodeOp, ctx context.Context, i int, node redis.UniversalClient) (o Outcome, v int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, v, err = NodeFailed, 0, fmt.Errorf("%w: node %d's client panicked: %v", ErrBadNode, i, p)
		}
	}()
	return op(ctx, i, node)
}

// nodeHealth tells a hung node from a slow one, so that a paused or hung
// process is not sent call after call that will sit unanswered in its
// socket. go-redis by default waits out its ReadTimeout (seconds) on such a
// call whatever the context says, and a client taking many locks would
// pile up a goroutine and a connection per call, plus the background
// releases of everything it sent there.
//
// The rule (Client.hung): node i is hung when all of these hold:
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
	// alive is when (c.since) the node last answered, or was sent a call
	// while nothing was pending: the start of its current silence.
	alive    atomic.Int64
	answered atomic.Int64 // when (c.since) the node last answered
	probed   atomic.Int64 // when (c.since) a hung node was last sent a call
}

const probeEvery = 10

// hungNodes returns which nodes a round skips as hung (nil: none). It skips
// none if too few nodes would be left to form a majority: skipping is there
// to spare a round that can succeed without them, and a round that cannot
// had better ask, in case the silence was the client's own after all. A
// majority that is really down then costs each attempt a node timeout and
// calls that pile up until go-redis gives up on them, as without skipping.
func (c *Client) hungNodes() []bool {
	var hung []bool
	skipped := 0
	for i := range c.health {
		if c.hung(i) {
			if hung == nil {
				hung = make([]bool, len(c.health))
			}
			hung[i] = true
			skipped++
		}
	}
	if len(c.health)-skipped < majority(len(c.health)) {
		return nil
	}
	return hung
}

// hung applies nodeHealth's rule to node i. A true answer may be a probe's
// ticket: the caller is then to send the call after all.
func (c *Client) hung(i int) bool {
	h := &c.health[i]
	now, timeout := c.since(), int64(c.cfg.nodeTimeout)
	alive := h.alive.Load()
	if h.pending.Load() == 0 || now-alive <= timeout {
		return false
	}
	others, need := 0, majority(len(c.health))
	for j := range c.health {
		if j != i && c.health[j].answered.Load() > alive+timeout {
			others++
		}
	}
	if others < need {
		return false
	}
	probed := h.probed.Load()
	return now-max(probed, alive) <= probeEvery*timeout || !h.probed.CompareAndSwap(probed, now)
}

func (h *nodeHealth) sending(c *Client) {
	if h.pending.Add(1) == 1 {
		h.alive.Store(c.since())
	}
}

// returned records the end of a call. Only a reply proves the node alive: a
// call that ended in a timeout or a broken connection does not.
func (h *nodeHealth) returned(c *Client, err error) {
	h.pending.Add(-1)
	if err == nil || isServerReply(err) {
		now := c.since()
		h.alive.Store(now)
		h.answered.Store(now)
	}
}

// round holds the deadline that a round's calls share. The last call to end
// releases it.
type round struct {
	ctx     context.Context
	cancel  context.CancelFunc
	running atomic.Int32
}

func (r *round) callEnded() {
	if r.running.Add(-1) == 0 {
		r.cancel()
	}
}

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

// snapshot copies the results, so that late replies do not race with a
// caller that keeps them.
func (t *tally) snapshot() []NodeResult { return append([]NodeResult(nil), t.results...) }

// collect adds replies to t until done(t) holds, every node has an outcome,
// or ctx ends; it returns ctx's error in the last case. hard is the round's
// start plus the node timeout. Once a majority of the nodes has answered
// (a hung node's skip or a timeout is no answer), it gives up on the silent
// ones as NodeTimedOut at the later of hard and the last reply plus the
// longer of the node timeout and the slowest reply of the round. Until a
// majority has answered it waits up to the round's patience
// (config.patience), and never longer. So a silent minority is cut off at
// about the node timeout while the others answer, but a round in which most
// nodes are late (a saturated client machine, a dial burst) is given more
// time rather than failed at once; the validity check still refuses a lock
// that took too long. If soon is not nil it is asked after every reply for
// an earlier time to stop waiting, after which the silent nodes stay
// NodeNoReply.
func (c *Client) collect(ctx context.Context, replies <-chan reply, t *tally, done func(*tally) bool,
	hard time.Time, soon func(*tally) (time.Time, bool)) error {
	if t.replied == t.n || done(t) {
		return nil
	}
	// hard is the round's start plus the node timeout; the silent nodes are
	// given up on only when the others are not silent too (see giveUpAt).
	last := hard.Add(c.cfg.patience() - c.cfg.nodeTimeout)
	giveUpAt := func() time.Time {
		if t.answered < t.majority {
			return last
		}
		g := hard
		if end := t.lastReply.Add(max(c.cfg.nodeTimeout, t.slowest)); end.After(g) {
			g = end
		}
		if g.After(last) {
			return last
		}
		return g
	}
	at := giveUpAt()
	early := false // at is soon's, before the give-up time
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	for t.replied < t.n && !done(t) {
		select {
		case r := <-replies:
			t.add(r)
			next, ok := time.Time{}, false
			if soon != nil {
				next, ok = soon(t)
			}
			// soon only ever brings the end forward; the give-up time
			// only moves later once a reply has come.
			if g := giveUpAt(); ok && next.Before(g) && (!early || next.Before(at)) {
				at, early = next, true
			} else if !early {
				at = g
			}
			timer.Reset(time.Until(at))
		case <-timer.C:
			if early {
				t.stopWaiting()
			} else {
				t.timeOut(c.cfg.nodeTimeout, c.unreachable)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// grace is how long, once the outcome is clear, a round keeps waiting for
// the nodes still silent: three times the slowest reply so far, and at least
// a tenth of the node timeout. Healthy nodes answer within about the same
// time as each other, so they still count; a dead or paused one stops
// costing the full node timeout.
func (c *Client) grace(t *tally) time.Duration {
	return max(3*t.slowest, c.cfg.nodeTimeout/10, time.Millisecond)
}

// giveUpOnContention is the "soon" of an acquisition: once a majority has
// answered and a node refused, wait only a grace for the rest. Giving up
// early is always safe.
func (c *Client) giveUpOnContention(t *tally) (time.Time, bool) {
	if t.counts[NodeRefused] == 0 || t.replied < t.majority {
		return time.Time{}, false
	}
	return t.lastReply.Add(c.grace(t)), true
}

// waitForStragglers is the "soon" of a release: once a majority has
// released, wait only a grace for the rest, so that the caller's next
// acquisition does not find this value still on a healthy node.
func (c *Client) waitForStragglers(t *tally) (time.Time, bool) {
	if !t.won() {
		return time.Time{}, false
	}
	return t.lastReply.Add(c.grace(t)), true
}

// isTimeout tells a node that did not answer in time from one that failed.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isServerReply reports whether err is an error reply from Redis itself
// (WRONGTYPE, a script error): retrying the same call cannot help.
func isServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
