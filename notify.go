package redlock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Release notifications: a waiter in Lock wakes when the lock is released
// instead of sleeping out its retry delay (Redisson does the same).
//
// The release script PUBLISHes on "<key>:released" when it deletes the lock.
// Each client keeps one subscriber connection per node, shared by all of
// its waiters, subscribed to the channels of the names being waited for.
// Notifications are a hint: a lost one costs only the jittered retry delay,
// which stays in place as the fallback.
//
// Fairness without coordination: a notification wakes only the oldest of a
// client's waiters for the name; that waiter does not retry at once but
// after a delay that shrinks with how long it has waited, so across clients
// the oldest waiter's attempt lands first and wins; and a client that has
// just released a name lets the notified waiters go first before it takes
// the name again. Only Unlock notifies: the rollback of a failed attempt
// does not, or every failed attempt would wake the others into another
// round of split votes.

// handoffSpread bounds the age-priority delay of a woken waiter.
const handoffSpread = 2 * time.Millisecond

// wakeDelay is how long a waiter that has waited for age lets others go
// first after a notification: handoffSpread for a newcomer, near zero for a
// waiter that has waited long.
func wakeDelay(age time.Duration) time.Duration {
	return time.Duration(float64(handoffSpread) / (1 + float64(age)/float64(10*time.Millisecond)))
}

// notifier is a client's subscriber connections.
type notifier struct {
	c *Client

	mu      sync.Mutex
	nodes   []*subscriber              // one per node, started on first use
	waiters map[string][]chan struct{} // per channel, oldest first
	closed  bool
	wg      sync.WaitGroup

	releasedMu sync.Mutex
	released   map[string]time.Time // when this client last released a name
}

// subscriber is one node's subscriber connection. Subscribe and unsubscribe
// requests go through ops, in order, so that a slow or paused node never
// blocks a waiter.
type subscriber struct {
	ps  *redis.PubSub
	ops chan subOp
}

type subOp struct {
	channel string
	sub     bool
}

func (c *Client) releasedChannel(key string) string { return key + ":released" }

// wait registers a waiter for key's release notifications. The returned
// channel receives (coalesced) notifications; call the cancel func when done.
func (n *notifier) wait(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	channel := n.c.releasedChannel(key)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ch, func() {}
	}
	if n.nodes == nil {
		n.start()
	}
	if n.waiters == nil {
		n.waiters = map[string][]chan struct{}{}
	}
	if len(n.waiters[channel]) == 0 {
		n.request(subOp{channel, true})
	}
	n.waiters[channel] = append(n.waiters[channel], ch)
	return ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.waiters[channel] = slices.DeleteFunc(n.waiters[channel], func(c chan struct{}) bool { return c == ch })
		if len(n.waiters[channel]) == 0 {
			delete(n.waiters, channel)
			if !n.closed {
				n.request(subOp{channel, false})
			}
		}
	}
}

// request queues a (un)subscription on every node; n.mu is held. A node
// whose queue is full misses it: its waiters fall back to the retry delay.
func (n *notifier) request(op subOp) {
	for _, s := range n.nodes {
		select {
		case s.ops <- op:
		default:
		}
	}
}

// start opens the subscriber connections; n.mu is held.
func (n *notifier) start() {
	for _, node := range n.c.nodes {
		s := &subscriber{ps: node.Subscribe(context.Background()), ops: make(chan subOp, 256)}
		n.nodes = append(n.nodes, s)
		msgs := s.ps.Channel()
		n.wg.Go(func() {
			for m := range msgs {
				n.deliver(m.Channel)
			}
		})
		n.wg.Go(func() {
			for op := range s.ops {
				ctx, cancel := context.WithTimeout(context.Background(), n.c.cfg.nodeTimeout)
				if op.sub {
					_ = s.ps.Subscribe(ctx, op.channel)
				} else {
					_ = s.ps.Unsubscribe(ctx, op.channel)
				}
				cancel()
			}
		})
	}
}

// deliver wakes this client's oldest waiter for the channel: within one
// client the lock passes in arrival order, and the others do not pile onto
// the nodes with attempts that would split the votes.
func (n *notifier) deliver(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ws := n.waiters[channel]; len(ws) > 0 {
		select {
		case ws[0] <- struct{}{}:
		default: // a notification is already pending
		}
	}
}

// close ends the subscriptions and waits for their goroutines.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	nodes := n.nodes
	n.nodes = nil
	for _, s := range nodes {
		close(s.ops)
	}
	n.mu.Unlock()
	for _, s := range nodes {
		s.ps.Close()
	}
	n.wg.Wait()
}

// noteRelease remembers that this client released key just now.
func (n *notifier) noteRelease(key string) {
	n.releasedMu.Lock()
	defer n.releasedMu.Unlock()
	if n.released == nil {
		n.released = map[string]time.Time{}
	}
	now := time.Now()
	n.released[key] = now
	for k, t := range n.released { // keep the map small
		if now.Sub(t) > time.Second {
			delete(n.released, k)
		}
	}
}

// yieldAfterRelease is how long Lock lets notified waiters go first when
// this client released key a moment ago.
func (n *notifier) yieldAfterRelease(key string) time.Duration {
	n.releasedMu.Lock()
	defer n.releasedMu.Unlock()
	t, ok := n.released[key]
	if !ok || time.Since(t) > 10*handoffSpread {
		return 0
	}
	return handoffSpread
}
