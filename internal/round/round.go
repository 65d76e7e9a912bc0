package round

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reply is what one node's call sends back to the collector.
type Reply struct {
	Node    int
	Outcome Outcome
	Value   int64 // operation-specific: a fencing candidate or a committed token
	Err     error
	Latency time.Duration
	Sent    bool // the call was sent; false for a node skipped as hung (FanOut)
}

// Spec describes what one round sends to every node.
type Spec struct {
	Name string // what Trace calls the round: "lock", "commit"...
	Op   NodeOp
	// Split, if not nil, is Op in two halves: a call that would wait for
	// its node's next batch rides it without a goroutine (batched.go).
	Split Split
	// After, Sent and Then are FanOut's: a call waits for After[i], nodes
	// with Sent[i] false are skipped, Then follows each call on its node.
	After []chan struct{}
	Sent  []bool
	Then  func(Reply)
	// Detach: the calls go on if ctx ends; ctx bounds only the wait for
	// their replies (a release must reach the nodes).
	Detach bool
	// Quorum is how many answers end the round's patience (collect): 0
	// means a majority of the nodes, NoPatience none (a silent node is
	// given up on at about the node timeout from the start).
	Quorum int
}

// NoPatience is the Spec.Quorum of a round that is never patient.
const NoPatience = -1

// Run is one round on the quorum: it sends s.Op to every node
// (FanOut) and counts the replies (collect, with its done and soon; a nil
// done waits for every node) until done holds, every node has an outcome,
// or ctx ends. It returns the tally, and ctx's error in the last case. On a
// closed client it sends nothing and returns a nil tally and ErrClosed.
// If ctx ended, the nodes still silent have an outcome all the same
// (Tally.CutShort), so the error can say why on every node.
//
// done and soon are parameters, not fields of s: what s holds goes to the
// node goroutines, and would take them to the heap with it.
func (e *Engine) Run(ctx context.Context, s Spec, done func(*Tally) bool,
	soon func(*Tally) (time.Time, bool)) (*Tally, error) {
	deadline := time.Now().Add(e.timeout)
	callCtx := ctx
	if s.Detach {
		callCtx = context.WithoutCancel(ctx)
	}
	replies, err := e.fanOut(callCtx, s.Name, s.After, s.Sent, s.Op, s.Split, s.Then)
	if err != nil {
		return nil, err
	}
	if done == nil {
		done = func(*Tally) bool { return false }
	}
	t := NewTally(len(e.nodes))
	if s.Quorum != 0 {
		t.quorum = max(s.Quorum, 0)
	}
	err = e.collect(ctx, replies, t, done, deadline, soon)
	if cerr := callerEnded(ctx); err == nil && !t.Won() && t.cutBy(cerr) {
		// The calls that ctx ended decided the round (they left too few
		// nodes to win) before collect saw ctx end: it was ctx, not the
		// nodes, and the caller must be told so.
		err = cerr
	}
	if err != nil {
		t.CutShort(err, e.Unreachable, time.Since(deadline.Add(-e.timeout)))
	}
	return t, err
}

// NodeOp performs one call on node i. It returns the outcome, an
// operation-specific value and, for NodeFailed, the error.
type NodeOp func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error)

// FanOut starts op on every node at once, each call on its own worker and
// bounded by the node timeout, and returns the channel on which the replies
// arrive in the order they come (it is buffered for all of them, so nobody
// has to drain it).
//
// name names the round for Trace. If after is not nil, the call on node i starts only once after[i] is
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
func (e *Engine) FanOut(ctx context.Context, name string, after []chan struct{}, sent []bool, op NodeOp,
	then func(Reply)) (<-chan Reply, error) {
	return e.fanOut(ctx, name, after, sent, op, nil, then)
}

func (e *Engine) fanOut(ctx context.Context, name string, after []chan struct{}, sent []bool, op NodeOp,
	split Split, then func(Reply)) (<-chan Reply, error) {
	replies := make(chan Reply, len(e.nodes))
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	// Counted before Close can return: Wait waits for these calls. The
	// rest runs without the lock, which a Trace hook (NodeCall) or a
	// call's Then may need.
	e.bg.Add(len(e.nodes))
	e.mu.Unlock()
	// The calls of a round start together, so they share one deadline: a
	// context per node was a tenth of an acquisition's allocations. A call
	// that had to wait for its node's previous call gets its own.
	// The calls may run for the patience, not just the node timeout:
	// a call cut at the node timeout on a saturated machine would abort the
	// very dial or write that was about to succeed (go-redis dials under the
	// call's context), and the next attempt would start from scratch.
	r := &round{name: name}
	r.ctx, r.cancel = context.WithTimeout(ctx, e.patience)
	r.running.Store(int32(len(e.nodes)))
	var hung []bool
	if after == nil {
		hung = e.hungNodes()
	}
	for i, node := range e.links {
		c := nodeCall{e: e, ctx: ctx, r: r, i: i, node: node, after: after, sent: sent,
			hung: hung != nil && hung[i], op: op, then: then, replies: replies}
		if split != nil && e.riding && e.queue(&c, split) {
			continue
		}
		e.workers.run(c)
	}
	return replies, nil
}

// round holds the deadline that a round's calls share. The last call to end
// releases it.
type round struct {
	name    string // what Trace calls it: "lock", "commit"...
	ctx     context.Context
	cancel  context.CancelFunc
	running atomic.Int32
	// queued is the calls that ride their links' batches (batched.go), and
	// unwatch stops the watch that ends them with ctx.
	queued  []atomic.Pointer[queuedCall]
	unwatch atomic.Pointer[func() bool]
}

func (r *round) callEnded() {
	if r.running.Add(-1) == 0 {
		if stop := r.unwatch.Load(); stop != nil {
			(*stop)() // else ending ctx would start a goroutine to end nothing
		}
		r.cancel()
	}
}

// collect adds replies to t until done(t) holds, every node has an outcome,
// or ctx ends; it returns ctx's error in the last case. hard is the round's
// start plus the node timeout. Once a majority of the nodes has answered
// (Spec.Quorum of them, if set; a hung node's skip or a timeout is no
// answer), it gives up on the silent
// ones as NodeTimedOut at the later of hard and the last reply plus the
// longer of the node timeout and the slowest reply of the round. Until a
// majority has answered it waits up to the round's patience
// (Config.Patience), and never longer. So a silent minority is cut off at
// about the node timeout while the others answer, but a round in which most
// nodes are late (a saturated client machine, a dial burst) is given more
// time rather than failed at once; the validity check still refuses a lock
// that took too long. If soon is not nil it is asked after every reply for
// an earlier time to stop waiting, after which the silent nodes stay
// NodeNoReply.
func (e *Engine) collect(ctx context.Context, replies <-chan Reply, t *Tally, done func(*Tally) bool,
	hard time.Time, soon func(*Tally) (time.Time, bool)) error {
	if t.Replied == t.N || done(t) {
		return nil
	}
	// hard is the round's start plus the node timeout; the silent nodes are
	// given up on only when the others are not silent too (see giveUpAt).
	last := hard.Add(e.patience - e.timeout)
	giveUpAt := func() time.Time {
		if t.Answered < t.quorum {
			return last
		}
		g := hard
		if end := t.LastReply.Add(max(e.timeout, t.Slowest)); end.After(g) {
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
	for t.Replied < t.N && !done(t) {
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
				t.timeOut(e.timeout, e.Unreachable)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Grace is how long, once the outcome is clear, a round keeps waiting for
// the nodes still silent: three times the slowest reply so far, and at least
// a tenth of the node timeout. Healthy nodes answer within about the same
// time as each other, so they still count; a dead or paused one stops
// costing the full node timeout.
func (e *Engine) Grace(t *Tally) time.Duration {
	return max(3*t.Slowest, e.timeout/10, time.Millisecond)
}

// GiveUpOnContention is the "soon" of an acquisition: once a majority has
// answered and a node refused, wait only a grace for the rest. Giving up
// early is always safe.
func (e *Engine) GiveUpOnContention(t *Tally) (time.Time, bool) {
	if t.Counts[NodeRefused] == 0 || t.Replied < t.Majority {
		return time.Time{}, false
	}
	return t.LastReply.Add(e.Grace(t)), true
}

// callerEnded is ctx's error, or DeadlineExceeded once its deadline has
// passed and before its timer has fired.
func callerEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// endedBy returns the caller's ctx's error if it ended a call that failed
// with err: ctx's error itself, or a read or write that timed out at ctx's
// deadline (a go-redis client with ContextTimeoutEnabled sets its socket
// deadline to ctx's and says "i/o timeout", not ctx's error). Else nil.
func endedBy(ctx context.Context, err error) error {
	cerr := callerEnded(ctx)
	if err == nil || cerr == nil {
		return nil
	}
	if errors.Is(err, cerr) || cerr == context.DeadlineExceeded && IsTimeout(err) {
		return cerr
	}
	return nil
}
