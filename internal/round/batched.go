package round

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/quorumlock/redlock/internal/batch"
	"github.com/redis/go-redis/v9"
)

// A call that would wait for its node's next batch (package batch) needs
// no goroutine of its own to wait: it is queued on the link from the
// caller's goroutine, and the goroutine that sends the batch parses its
// reply and delivers it. Under load that is two goroutine hand-offs fewer
// a call (the worker woken to send it, and woken again by its reply),
// which were the better part of what the client spent beyond go-redis.
// A call that would go out at once still goes on a worker, as does one
// that must first wait for something (an earlier call on the node) and a
// retry of one the node did not know the script of.

// Split is a NodeOp in two halves, for calls that can ride a batch.
type Split interface {
	// Command returns node i's command, or nil if the call must first
	// wait for something or cannot be sent as one command: it then runs
	// as the round's Op, on a worker.
	Command(i int) []any
	// Parse turns node i's reply into the call's outcome, as Op would. It
	// runs on the goroutine that sent the batch: it must not block.
	Parse(i int, cmd *redis.Cmd) (Outcome, int64, error)
}

// queuedCall is one node's part of a round, queued on the node's link.
type queuedCall struct {
	nodeCall
	split Split
	p     *batch.Pending
	told  atomic.Bool // its reply was delivered (Complete or expire)
}

// queue queues c's call on its node's link if it would wait for a batch,
// and reports whether it did. If it returns false with c.started set, the
// call was started and only has to be sent (send), at once.
func (e *Engine) queue(c *nodeCall, split Split) bool {
	i := c.i
	if c.hung {
		return false
	}
	if c.after != nil && c.after[i] != nil {
		select {
		case <-c.after[i]:
		default:
			return false
		}
	}
	// Only now: what the call waited for (after) may have written sent.
	if c.sent != nil && !c.sent[i] {
		return false
	}
	link := e.batches[i]
	if !link.Busy() {
		return false // nothing to build: it goes out at once, on a worker
	}
	args := split.Command(i)
	if args == nil {
		return false
	}
	r := c.r
	c.started = e.sending(r, i)
	q := &queuedCall{nodeCall: *c, split: split}
	if q.p = link.TryQueue(r.ctx, redis.NewCmd(r.ctx, args...), q); q.p == nil {
		return false
	}
	if r.queued == nil {
		// The round's calls end at its ctx, as a worker's call does,
		// though no goroutine waits for them. (A ctx that ended before
		// this runs the watch at once.)
		r.queued = make([]atomic.Pointer[queuedCall], len(e.nodes))
		stop := context.AfterFunc(r.ctx, r.expire)
		r.unwatch.Store(&stop)
	}
	r.queued[i].Store(q)
	if err := r.ctx.Err(); err != nil {
		q.expire(err) // the watch may have looked before the Store
	}
	return true
}

// Complete is the call's reply, on the goroutine that sent its batch.
func (q *queuedCall) Complete(cmd *redis.Cmd) {
	if !q.told.CompareAndSwap(false, true) {
		return // its ctx ended first
	}
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		// A fresh or restarted node: Op sends the script's source, which
		// takes a call of its own, on a worker. The script did not run.
		q.e.workers.run(q.nodeCall)
		return
	}
	q.finish(safeParse(q.split, q.i, cmd))
}

// expire ends the calls of r that have no reply yet once r's ctx has ended
// (its patience, or the caller's ctx), as a worker's Do would return: not
// sent if their batch has not left, and the reply dropped if it has.
func (r *round) expire() {
	err := r.ctx.Err()
	for i := range r.queued {
		if q := r.queued[i].Load(); q != nil {
			q.expire(err)
		}
	}
}

func (q *queuedCall) expire(err error) {
	if !q.told.CompareAndSwap(false, true) {
		return
	}
	cmd := redis.NewCmd(q.r.ctx)
	if q.p.Unsend() {
		cmd.SetErr(&batch.NotSentError{Err: err})
	} else {
		cmd.SetErr(err)
	}
	q.finish(safeParse(q.split, q.i, cmd))
}

// finish delivers the call's outcome, as nodeCall.run does.
func (q *queuedCall) finish(outcome Outcome, value int64, err error) {
	defer q.e.bg.Done()
	rep := q.e.returned(q.ctx, q.r, q.i, q.started, outcome, value, err)
	q.r.callEnded()
	q.replies <- rep
	if q.then != nil {
		q.then(rep)
	}
}

// send sends a call that queue started, on a worker.
func (e *Engine) send(c *nodeCall) Reply {
	defer c.r.callEnded()
	outcome, value, err := safeOp(c.op, c.r.ctx, c.i, c.node)
	return e.returned(c.ctx, c.r, c.i, c.started, outcome, value, err)
}

// safeParse is safeOp's for Parse.
func safeParse(s Split, i int, cmd *redis.Cmd) (o Outcome, v int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, v, err = NodeFailed, 0, fmt.Errorf("%w: parsing node %d's reply panicked: %v", ErrBadNode, i, p)
		}
	}()
	return s.Parse(i, cmd)
}
