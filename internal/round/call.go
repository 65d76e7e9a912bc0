package round

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodeCall is one node's part of a round, handed to a worker by value:
// a closure per call was a tenth of a lock+unlock's allocations.
type nodeCall struct {
	e       *Engine
	ctx     context.Context
	r       *round
	i       int
	node    redis.UniversalClient
	after   []chan struct{}
	sent    []bool
	hung    bool
	op      NodeOp
	then    func(Reply)
	replies chan<- Reply
	started time.Time // the call was started (queue): it only has to be sent
}

func (c *nodeCall) run() {
	defer c.e.bg.Done()
	var rep Reply
	if c.started.IsZero() {
		rep = c.e.call(c.ctx, c.r, c.i, c.node, c.after, c.sent, c.hung, c.op)
	} else {
		rep = c.e.send(c)
	}
	c.replies <- rep
	if c.then != nil {
		c.then(rep)
	}
}

// call is one node's part of a round (FanOut).
func (e *Engine) call(ctx context.Context, r *round, i int, node redis.UniversalClient, after []chan struct{},
	sent []bool, hung bool, op NodeOp) Reply {
	defer r.callEnded()
	skipped := Reply{Node: i, Outcome: NodeTimedOut, Err: ErrNodeHung}
	if hung {
		if err := e.Unreachable(i); err != nil {
			skipped.Outcome, skipped.Err = NodeFailed, err
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
			callCtx, cancel = context.WithTimeout(ctx, e.patience)
			defer cancel()
		}
	}
	if sent != nil && !sent[i] {
		return skipped
	}
	start := e.sending(r, i)
	outcome, value, err := safeOp(op, callCtx, i, node)
	return e.returned(ctx, r, i, start, outcome, value, err)
}

// sending is the start of node i's call in round r.
func (e *Engine) sending(r *round, i int) time.Time {
	if e.hooks.NodeCall != nil {
		e.hooks.NodeCall(r.name, i)
	}
	e.health[i].sending(e)
	return time.Now()
}

// returned is the end of node i's call in round r, sent at start, whose op
// said outcome, value and err: it records the node's health and names why
// a call failed (the caller's ctx, a timeout, a dial that fails).
func (e *Engine) returned(ctx context.Context, r *round, i int, start time.Time, outcome Outcome, value int64,
	err error) Reply {
	e.health[i].returned(e, err)
	if err != nil && (outcome == NodeGranted || outcome == NodeRefused) {
		outcome = NodeFailed
	}
	if cerr := endedBy(ctx, err); err != nil && outcome != NodeAmnesiac && cerr != nil {
		// The caller's ctx ended the call, not the node: it did not answer
		// in time for this caller, which says nothing about the node.
		outcome, err = NodeTimedOut, &noAnswerError{cerr}
	} else if outcome == NodeFailed && IsTimeout(err) {
		if cause := e.Unreachable(i); cause != nil {
			err = cause // go-redis was redialling until the deadline
		} else {
			outcome = NodeTimedOut
		}
	}
	rep := Reply{Node: i, Outcome: outcome, Value: value, Err: err, Latency: time.Since(start), Sent: true}
	if e.hooks.NodeReply != nil {
		e.hooks.NodeReply(r.name, i, NodeResult{Node: i, Outcome: outcome, Err: err, Latency: rep.Latency})
	}
	return rep
}

// safeOp runs op, turning a panic into a failed call: a go-redis client
// that was never set up (a zero redis.Client{}) or a UniversalClient of the
// caller's that panics would otherwise kill the process from a goroutine no
// caller can recover in.
func safeOp(op NodeOp, ctx context.Context, i int, node redis.UniversalClient) (o Outcome, v int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, v, err = NodeFailed, 0, fmt.Errorf("%w: node %d's client panicked: %v", ErrBadNode, i, p)
		}
	}()
	return op(ctx, i, node)
}
