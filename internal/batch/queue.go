package batch

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Completion is told a queued call's reply (TryQueue). Complete runs on
// the goroutine that sent the batch, once the reply or error is in cmd: it
// must not block, and the batch's other calls wait for it.
type Completion interface {
	Complete(cmd *redis.Cmd)
}

// Pending is a call TryQueue queued.
type Pending call

// TryQueue queues cmd for the node's next batch, if a call made now would
// wait for one (Do), and returns it; then's Complete is told its reply.
// No goroutine waits for it: a round's call rides its batch without one
// of its own (two goroutine hand-offs fewer a call under load). It returns
// nil, and queues nothing, if the call would go out at once: the caller
// then sends it itself (Do), as it would without the link.
//
// ctx bounds the call as Do's does, but nothing watches it while the call
// waits: the caller that gives up calls Unsend, and a call whose ctx has
// ended is still sent if its batch leaves before that.
func (l *Link) TryQueue(ctx context.Context, cmd *redis.Cmd, then Completion) *Pending {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.sendsAtOnce(now) {
		return nil
	}
	c := &call{ctx: ctx, cmd: cmd, then: then}
	l.queue = append(l.queue, c)
	l.arm(now)
	return (*Pending)(c)
}

// Unsend keeps the call from being sent, and reports true, if its batch
// has not left; then its Completion is never told. If the batch has left
// it reports false, and the Completion is told the reply when it comes.
func (p *Pending) Unsend() bool { return p.state.CompareAndSwap(queued, dropped) }

// Busy reports whether a call made now would wait for a batch: a hint, so
// that a caller builds what TryQueue takes only when it is likely to be
// queued (an idle link's call goes out at once, and costs nothing more).
func (l *Link) Busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.sendsAtOnce(time.Now())
}

// sendsAtOnce: a call made at now goes out at once (Do). l.mu is held.
func (l *Link) sendsAtOnce(now time.Time) bool {
	return len(l.queue) == 0 && (l.inFlight == 0 || l.inFlight < MaxInFlight && now.Sub(l.lastSent) >= l.patience())
}
