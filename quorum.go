package redlock

import (
	"context"
	"errors"
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
	// NodeFailed: the call returned an error other than a timeout.
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
	Err     error         // set for NodeFailed and NodeTimedOut
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
// and, unless after is set (a release of what was sent), a hung node
// (nodeHealth). The
// reply of a skipped node is NodeTimedOut with ErrNodeHung at once; nothing
// is sent, so nothing has to be undone there either.
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
	r := &round{}
	r.ctx, r.cancel = context.WithTimeout(ctx, c.cfg.nodeTimeout)
	r.running.Store(int32(len(c.nodes)))
	for i, node := range c.nodes {
		go func() {
			defer c.bg.Done()
			rep := c.call(ctx, r, i, node, after, sent, op)
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
	sent []bool, op nodeOp) reply {
	defer r.callEnded()
	skipped := reply{node: i, outcome: NodeTimedOut, err: ErrNodeHung}
	health := &c.health[i]
	if after == nil && health.hung(c) {
		return skipped
	}
	callCtx := r.ctx
	if after != nil && after[i] != nil {
		select {
		case <-after[i]:
		default:
			<-after[i]
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, c.cfg.nodeTimeout)
			defer cancel()
		}
	}
	if sent != nil && !sent[i] {
		return skipped
	}
	start := time.Now()
	health.sending(c)
	outcome, value, err := op(callCtx, i, node)
	health.returned(c, err)
	if err != nil && (outcome == NodeGranted || outcome == NodeRefused) {
		outcome = NodeFailed
	}
	if outcome == NodeFailed && isTimeout(err) {
		outcome = NodeTimedOut
	}
	return reply{node: i, outcome: outcome, value: value, err: err, latency: time.Since(start)}
}

// nodeHealth tells a hung node from a slow one, so that a paused or hung
// process is not sent call after call that will sit unanswered in its
// socket. go-redis by default waits out its ReadTimeout (seconds) on such a
// call whatever the context says, and a client taking many locks would
// pile up a goroutine and a connection per call, plus the background
// releases of everything it sent there.
//
// A node is hung while it has calls pending and has neither answered nor
// been idle for longer than the node timeout. A slow node that answers
// late still answers, and keeps being sent calls. A hung node is still sent
// one call every probeEvery node timeouts (counted from its last answer or
// probe): a go-redis client configured
// without any read timeout could leave a call pending for ever on a
// connection that died, while a new connection would work.
type nodeHealth struct {
	pending atomic.Int32 // calls sent and not returned
	// alive is when (c.since) the node last answered, or was sent a call
	// while nothing was pending.
	alive  atomic.Int64
	probed atomic.Int64 // when (c.since) a hung node was last sent a call
}

const probeEvery = 10

func (h *nodeHealth) hung(c *Client) bool {
	now, timeout := c.since(), int64(c.cfg.nodeTimeout)
	if h.pending.Load() == 0 || now-h.alive.Load() <= timeout {
		return false
	}
	probed := h.probed.Load()
	return now-max(probed, h.alive.Load()) <= probeEvery*timeout || !h.probed.CompareAndSwap(probed, now)
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
		h.alive.Store(c.since())
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
		t.lastReply = time.Now()
		t.slowest = max(t.slowest, r.latency)
		t.best = max(t.best, r.value)
	}
	t.record(r.node, r.outcome, r.err, r.latency)
}

// timeOut gives up on every node that has not answered by the node timeout.
func (t *tally) timeOut(timeout time.Duration) {
	for i := range t.results {
		t.record(i, NodeTimedOut, ErrNodeTimeout, timeout)
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
// or ctx ends; it returns ctx's error in the last case. At the node timeout
// (hard) it gives up on the silent nodes as NodeTimedOut. If soon is not nil
// it is asked after every reply for an earlier time to stop waiting, after
// which the silent nodes stay NodeNoReply.
//
// The node timeout is enforced here and not left to go-redis, which by
// default ignores context deadlines (ContextTimeoutEnabled is off) and waits
// out its own ReadTimeout of several seconds on a paused node.
func (c *Client) collect(ctx context.Context, replies <-chan reply, t *tally, done func(*tally) bool,
	hard time.Time, soon func(*tally) (time.Time, bool)) error {
	if t.replied == t.n || done(t) {
		return nil
	}
	at := hard
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	for t.replied < t.n && !done(t) {
		select {
		case r := <-replies:
			t.add(r)
			if soon == nil {
				continue
			}
			if next, ok := soon(t); ok && next.Before(at) {
				at = next
				timer.Reset(time.Until(at))
			}
		case <-timer.C:
			if at.Before(hard) {
				t.stopWaiting()
			} else {
				t.timeOut(c.cfg.nodeTimeout)
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
