package fairqueue

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// subscriber is one node's subscriber connection, and the goroutine that
// brings the connection's subscriptions in line with the names the client
// wants (Queue.locks).
//
// It reconciles a set instead of carrying out requests: a queue of
// SUBSCRIBE and UNSUBSCRIBE requests had to be bounded, and dropped what did
// not fit. While a node was paused, the request in progress waited out a
// read timeout, the queue filled, and the unsubscriptions that followed were
// lost: those channels stayed subscribed for good, go-redis resubscribing
// them on every reconnect. Now a change marks the name dirty and wakes the
// goroutine; a node that is slow or paused only delays its own
// subscriptions, and catches up with whatever the client wants by then. The
// state is bounded by the names wanted and the names held.
type subscriber struct {
	q    *Queue
	node int // index into the client's nodes
	ps   *redis.PubSub
	wake chan struct{} // holds one pending wake-up: dirty has names

	// Both are guarded by q.mu.
	//
	// held: the lock keys whose channels ps was last told to hold. go-redis
	// records a (un)subscription before sending it, and applies its record to
	// every new connection, so what it was told is what the node ends up
	// with, even when the call itself failed.
	held map[string]struct{}
	// dirty: the keys whose wanted and held states may differ, or that need a
	// SUBSCRIBE to be confirmed anew (their waiters wait for a confirmation).
	dirty map[string]struct{}
}

// reconcileBatch is how many names one SUBSCRIBE or UNSUBSCRIBE carries (two
// channels each): few round trips for a burst of waiters, and commands of a
// few kilobytes.
const reconcileBatch = 128

// start opens the subscriber connections; q.mu is held.
func (q *Queue) start() {
	q.stop = make(chan struct{})
	for i, node := range q.nodes {
		s := &subscriber{q: q, node: i, ps: node.Subscribe(context.Background()), wake: make(chan struct{}, 1),
			held: map[string]struct{}{}, dirty: map[string]struct{}{}}
		q.subs = append(q.subs, s)
		msgs := s.ps.ChannelWithSubscriptions()
		q.wg.Go(func() {
			for m := range msgs {
				switch m := m.(type) {
				case *redis.Message:
					q.deliver(s.node, m.Channel, m.Payload)
				case *redis.Subscription:
					if m.Kind == "subscribe" {
						q.listen(m.Channel)
					}
				}
			}
		})
		q.wg.Go(s.run)
	}
}

// changed tells every node's subscriber that key was added to the wanted
// names (added) or removed from them; q.mu is held.
func (q *Queue) changed(key string, added bool) {
	for _, s := range q.subs {
		s.changed(key, added)
	}
}

func (s *subscriber) changed(key string, added bool) {
	if _, held := s.held[key]; !added && !held {
		// Nothing to undo here. A SUBSCRIBE of key in progress is looked at
		// again when it returns (step).
		delete(s.dirty, key)
		return
	}
	// An added key is subscribed even if held already: its new waiters
	// wait for a confirmation.
	s.dirty[key] = struct{}{}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run reconciles whenever woken, until the queue closes.
func (s *subscriber) run() {
	for {
		select {
		case <-s.wake:
		case <-s.q.stop:
			return
		}
		for s.step() {
		}
	}
}

// step sends one batch of subscriptions and unsubscriptions, and reports
// whether dirty keys remain.
func (s *subscriber) step() bool {
	q := s.q
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	var sub, unsub []string
	for key := range s.dirty {
		if len(sub)+len(unsub) == reconcileBatch {
			break
		}
		delete(s.dirty, key)
		want := q.locks[key]
		_, held := s.held[key]
		switch {
		case want != nil && (!held || !want.listening):
			sub = append(sub, key)
		case want == nil && held:
			unsub = append(unsub, key)
		}
	}
	q.mu.Unlock()

	// Errors are left to go-redis, which has recorded the change and
	// applies it on its next connection (see held).
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.NodeTimeout)
	if len(unsub) > 0 {
		_ = s.ps.Unsubscribe(ctx, q.channelsOf(unsub)...)
	}
	if len(sub) > 0 {
		if f := q.cfg.Subscribe; f != nil {
			f(s.node)
		}
		_ = s.ps.Subscribe(ctx, q.channelsOf(sub)...)
	}
	cancel()

	q.mu.Lock()
	defer q.mu.Unlock()
	for _, key := range unsub {
		delete(s.held, key)
	}
	for _, key := range sub {
		s.held[key] = struct{}{}
	}
	// The wanted set may have changed while the calls were out.
	for _, keys := range [2][]string{sub, unsub} {
		for _, key := range keys {
			if _, held := s.held[key]; (q.locks[key] != nil) != held {
				s.dirty[key] = struct{}{}
			}
		}
	}
	return len(s.dirty) > 0
}

// channelsOf lists the channels of the lock keys.
func (q *Queue) channelsOf(keys []string) []string {
	channels := make([]string, 0, 2*len(keys))
	for _, key := range keys {
		ch := q.channels(key)
		channels = append(channels, ch[:]...)
	}
	return channels
}
