// Package batch carries one client's calls to one node: a call made while
// another is in flight to that node waits, with every other call made
// meanwhile, and they go out together as one go-redis pipeline when that one
// returns. Redis answers a pipeline of n commands in about one round trip,
// and with appendfsync always it syncs once for everything one turn of its
// event loop wrote, so many goroutines' calls cost about what one costs
// (rueidis calls this auto-pipelining).
//
// A call made while nothing is in flight goes out at once as a plain
// command, as it would without the link: no timer, nothing added to the
// idle path. One call held up (a dial that hangs, a reply lost until its
// timeout) must not hold every later call to its node behind it: once the
// latest send has been out for its patience (a few of the node's recent
// round trips), what queued goes out beside it, up to MaxInFlight sends at
// once. The user's go-redis client stays the transport (TLS, ACL, Sentinel,
// Cluster, their hooks: a batch of more than one call runs their
// ProcessPipelineHook, a lone call their ProcessHook).
package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxBatch bounds the calls in one pipeline, so that one slow reply does
// not hold thousands of callers; the rest go in the next.
const MaxBatch = 512

// MaxInFlight is how many calls or batches a link has in flight to its
// node at most: one while the node answers in its usual time, more only
// while those out are overdue.
const MaxInFlight = 4

// Patience bounds: a send is overdue once it has been out for
// patienceRTTs of the node's smoothed round trip, never sooner than
// MinPatience (a loopback round trip is tens of microseconds; a scheduler's
// hiccup on a busy machine is about a millisecond) and never later than
// MaxPatience (well within a node timeout: a held-up call costs the calls
// behind it at most that much).
const (
	MinPatience  = time.Millisecond
	MaxPatience  = 20 * time.Millisecond
	patienceRTTs = 4
)

// Link is a node's go-redis client whose Do batches as the package doc
// says. Every other method is the client's own.
type Link struct {
	redis.UniversalClient
	max int

	mu       sync.Mutex
	inFlight int           // calls and batches in flight
	lastSent time.Time     // when the latest of them left
	rtt      time.Duration // smoothed round trip of what returned
	queue    []*call       // what waits for the next batch, in order
	overdue  *time.Timer   // armed while calls queue: sends them beside an overdue send
	armed    bool
	// batches counts the batches in flight, each on a goroutine of its
	// own; idle, once Wait needs it, is signalled when it comes to 0. (A
	// WaitGroup cannot count them: a batch may start while Wait waits,
	// and a WaitGroup's Add must not race its Wait at zero.)
	batches int
	idle    *sync.Cond
}

// call is one Do, or one TryQueue, waiting in a Link's queue.
type call struct {
	ctx   context.Context
	cmd   *redis.Cmd
	state atomic.Int32  // queued, sent or dropped
	done  chan struct{} // Do's: closed once cmd has its reply
	then  Completion    // TryQueue's: told once cmd has its reply
}

const (
	queued = iota
	sent
	dropped // its caller gave up before it was sent: it never is
)

// NewLink returns node's link, with batches of at most max calls (MaxBatch
// if max < 1).
func NewLink(node redis.UniversalClient, max int) *Link {
	if max < 1 {
		max = MaxBatch
	}
	return &Link{UniversalClient: node, max: max}
}

// Do sends one command: at once if nothing is in flight to the node, or if
// the latest send is overdue and fewer than MaxInFlight are out; else in the
// next batch. If ctx ends while the call waits for its batch, it is never
// sent; if it ends once the batch has left, Do returns at once and the
// reply, when it comes, is dropped. Either way the Cmd's error is ctx's.
func (l *Link) Do(ctx context.Context, args ...any) *redis.Cmd {
	l.mu.Lock()
	now := time.Now()
	if l.sendsAtOnce(now) {
		l.inFlight++
		l.lastSent = now
		l.mu.Unlock()
		var cmd *redis.Cmd
		// Deferred: a client that panics (the caller recovers) must not
		// keep its place in flight for ever.
		defer func() { l.returned(now, cmd != nil && answered(cmd.Err())) }()
		cmd = l.UniversalClient.Do(ctx, args...)
		return cmd
	}
	c := &call{ctx: ctx, cmd: redis.NewCmd(ctx, args...), done: make(chan struct{})}
	l.queue = append(l.queue, c)
	l.arm(now)
	l.mu.Unlock()
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		// The batch writes c.cmd once sent: hand the caller another.
		cmd := redis.NewCmd(ctx, args...)
		if c.state.CompareAndSwap(queued, dropped) {
			cmd.SetErr(&NotSentError{ctx.Err()})
			return cmd
		}
		select {
		case <-c.done: // it was answered meanwhile
			return c.cmd
		default:
		}
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// patience is how long the latest send may be out before what queued
// goes beside it. l.mu is held.
func (l *Link) patience() time.Duration {
	return min(MaxPatience, max(MinPatience, patienceRTTs*l.rtt))
}

// answered tells a reply (a value, nil, or the node's error) from a call
// that got none: a timeout, a ctx that ended, a broken connection. Only a
// reply says how fast the node answers; a call that timed out says how
// long its caller waited.
func answered(err error) bool {
	if err == nil || err == redis.Nil {
		return true // without the heap allocation errors.As costs: every call comes here
	}
	var reply redis.Error
	return errors.Is(err, redis.Nil) || errors.As(err, &reply)
}

// returned learns the round trip of a send that left at start, then sends
// what queued in its place, or frees its place. Only the latest send that
// was answered teaches: one that others went beside was held up, and what
// went beside it says how fast the node is; one that timed out says how
// long its callers waited, and a run of them (a paused node, one call at a
// time) would raise the patience to their timeout and let a held-up call
// hold the rest again. A send out longer than twice the patience counts as
// that much, so a node that became slower raises the estimate in a few
// steps, up to MaxPatience.
func (l *Link) returned(start time.Time, taught bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if taught && start.Equal(l.lastSent) {
		took := min(time.Since(start), 2*l.patience())
		l.rtt += (took - l.rtt) / 8
	}
	if len(l.queue) == 0 {
		l.inFlight--
		return
	}
	if !start.Equal(l.lastSent) && time.Since(l.lastSent) < l.patience() {
		// A later send is out and not overdue: it carries the queue when
		// it returns, or the timer does if it is held up too. (Those out
		// before the latest were overdue when it left: nothing goes beside
		// a send that is not.)
		l.inFlight--
		l.arm(time.Now())
		return
	}
	l.dispatch()
}

// arm makes sure the queue goes out beside the latest send once that send
// is overdue, if nothing returns before. l.mu is held.
func (l *Link) arm(now time.Time) {
	if l.armed {
		return
	}
	l.armed = true
	wait := l.lastSent.Add(l.patience()).Sub(now)
	if l.overdue == nil {
		l.overdue = time.AfterFunc(wait, l.fire)
		return
	}
	l.overdue.Reset(wait)
}

// fire runs when the latest send may be overdue: if it is and there is room
// in flight, what queued goes beside it; if a later send left meanwhile,
// the timer waits for that one instead.
func (l *Link) fire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	if len(l.queue) == 0 || l.inFlight >= MaxInFlight {
		return // a return sends the queue, or nothing waits
	}
	if l.inFlight > 0 && time.Since(l.lastSent) < l.patience() {
		l.arm(time.Now())
		return
	}
	l.inFlight++
	l.dispatch()
}

// dispatch sends the head of the queue as one batch in a place already
// counted in inFlight, and arms the timer for what is left. l.mu is held.
func (l *Link) dispatch() {
	n := min(len(l.queue), l.max)
	batch := l.queue[:n:n]
	l.queue = l.queue[n:]
	if len(l.queue) == 0 {
		l.queue = nil // let the batch's array go with it
	}
	l.lastSent = time.Now()
	l.batches++
	go l.send(batch, l.lastSent)
	switch {
	case len(l.queue) > 0:
		l.arm(l.lastSent)
	case l.armed:
		// Nothing waits: no wake-up while the node keeps up.
		l.overdue.Stop()
		l.armed = false
	}
}

// send runs one batch as a pipeline, bounded by the latest deadline of its
// calls (none if one has none: a release that must reach the node), and
// goes on with the next.
func (l *Link) send(batch []*call, start time.Time) {
	defer l.batchEnded()
	taught := false
	defer func() { l.returned(start, taught) }()
	live := batch[:0]
	told := 0 // live[:told] have been given their replies
	defer func() {
		// Nobody can recover a panic on this goroutine: a client that was
		// never set up (a zero redis.Client{}) or a caller's UniversalClient
		// that panics fails the calls of the batch instead.
		if p := recover(); p != nil {
			for _, c := range live[told:] {
				c.cmd.SetErr(fmt.Errorf("%w: %v", ErrClientPanicked, p))
				c.answer()
			}
		}
	}()
	var deadline time.Time
	bounded := true
	for _, c := range batch {
		if !c.state.CompareAndSwap(queued, sent) {
			continue
		}
		live = append(live, c)
		if d, ok := c.ctx.Deadline(); !ok {
			bounded = false
		} else if d.After(deadline) {
			deadline = d
		}
	}
	switch len(live) {
	case 0:
		return
	case 1:
		// Alone after all: as a plain command, as the first call goes.
		c := live[0]
		_ = l.UniversalClient.Process(c.ctx, c.cmd)
		taught = answered(c.cmd.Err())
		told++
		c.answer()
		return
	}
	ctx := context.Background()
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	pipe := l.UniversalClient.Pipeline()
	for _, c := range live {
		_ = pipe.Process(ctx, c.cmd)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own reply or error
	taught = true
	for _, c := range live {
		taught = taught && answered(c.cmd.Err())
	}
	for _, c := range live {
		told++
		c.answer()
	}
}

// answer hands c its reply: Do's caller wakes, TryQueue's Completion runs.
func (c *call) answer() {
	if c.then != nil {
		c.then.Complete(c.cmd)
		return
	}
	close(c.done)
}

// Wait waits until no batch is in flight. A batch that starts while Wait
// waits (a queued call sent by the overdue timer) is waited for too; calls
// made after Wait returned may start batches it did not wait for.
func (l *Link) Wait() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.batches > 0 {
		if l.idle == nil {
			l.idle = sync.NewCond(&l.mu)
		}
		l.idle.Wait()
	}
}

// batchEnded is the end of a batch's goroutine.
func (l *Link) batchEnded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.batches--; l.batches == 0 && l.idle != nil {
		l.idle.Broadcast()
	}
}

// ErrClientPanicked is the error of the calls of a batch whose go-redis
// client panicked.
var ErrClientPanicked = errors.New("redlock: unusable node client")

// NotSentError is the error of a call whose ctx ended while it waited for
// its batch: it was never sent, so nothing of it can reach the node later.
// It wraps ctx's error.
type NotSentError struct{ Err error }

func (e *NotSentError) Error() string { return "redlock: not sent: " + e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }

// NotSent is true: the command never left the client.
func (e *NotSentError) NotSent() bool { return true }
