// Package batch carries one client's calls to one node: a call made while
// MaxInFlight others are in flight to that node waits, with every other
// call made meanwhile, and they go out together as one go-redis pipeline
// when one of those returns. Redis answers a pipeline of n commands in about
// one round trip, and with appendfsync always it syncs once for everything
// one turn of its event loop wrote, so many goroutines' calls cost about
// what one costs (rueidis calls this auto-pipelining).
//
// A call made while fewer are in flight goes out at once as a plain command,
// as it would without the link: no timer, nothing added to the idle path.
// More than one in flight keeps one call that is held up (a dial that
// hangs, a reply lost until its timeout) from holding every other call to
// its node behind it; batches form once they are all busy. The user's go-redis client
// stays the transport (TLS, ACL, Sentinel, Cluster, their hooks: a batch of
// more than one call runs their ProcessPipelineHook, a lone call their
// ProcessHook).
package batch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxBatch bounds the calls in one pipeline, so that one slow reply does
// not hold thousands of callers; the rest go in the next.
const MaxBatch = 512

// MaxInFlight is how many calls or batches a link has in flight to its
// node at most.
const MaxInFlight = 4

// Link is a node's go-redis client whose Do batches as the package doc
// says. Every other method is the client's own.
type Link struct {
	redis.UniversalClient
	max int

	mu       sync.Mutex
	inFlight int     // calls and batches in flight
	queue    []*call // what waits for the next batch, in order
	wg       sync.WaitGroup
}

// call is one Do waiting in a Link's queue.
type call struct {
	ctx   context.Context
	cmd   *redis.Cmd
	state atomic.Int32 // queued, sent or dropped
	done  chan struct{}
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

// Do sends one command: at once if fewer than MaxInFlight calls or batches
// are in flight to the node, else in the next batch. If ctx ends while the call waits for its batch, it is
// never sent; if it ends once the batch has left, Do returns at once and
// the reply, when it comes, is dropped. Either way the Cmd's error is ctx's.
func (l *Link) Do(ctx context.Context, args ...any) *redis.Cmd {
	l.mu.Lock()
	if l.inFlight < MaxInFlight {
		l.inFlight++
		l.mu.Unlock()
		cmd := l.UniversalClient.Do(ctx, args...)
		l.next()
		return cmd
	}
	c := &call{ctx: ctx, cmd: redis.NewCmd(ctx, args...), done: make(chan struct{})}
	l.queue = append(l.queue, c)
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

// next sends what queued while the link was busy in the place of what
// just returned, or frees that place.
func (l *Link) next() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		l.inFlight--
		return
	}
	n := min(len(l.queue), l.max)
	batch := l.queue[:n:n]
	l.queue = l.queue[n:]
	if len(l.queue) == 0 {
		l.queue = nil // let the batch's array go with it
	}
	l.wg.Add(1)
	go l.send(batch)
}

// send runs one batch as a pipeline, bounded by the latest deadline of its
// calls (none if one has none: a release that must reach the node), and
// goes on with the next.
func (l *Link) send(batch []*call) {
	defer l.wg.Done()
	defer l.next()
	live := batch[:0]
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
		close(c.done)
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
	for _, c := range live {
		close(c.done)
	}
}

// Wait waits for the batches in flight to end. Calls made after Wait began
// may start batches it does not wait for.
func (l *Link) Wait() { l.wg.Wait() }

// NotSentError is the error of a call whose ctx ended while it waited for
// its batch: it was never sent, so nothing of it can reach the node later.
// It wraps ctx's error.
type NotSentError struct{ Err error }

func (e *NotSentError) Error() string { return "redlock: not sent: " + e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }

// NotSent is true: the command never left the client.
func (e *NotSentError) NotSent() bool { return true }
