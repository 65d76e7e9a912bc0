package redlock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// subscriber is one node's subscriber connection, and the goroutine that
// brings the connection's subscriptions in line with the names the client
// wants (notifier.locks).
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
	n    *notifier
	node int // index into the client's nodes
	ps   *redis.PubSub
	wake chan struct{} // holds one pending wake-up: dirty has names

	// Both are guarded by n.mu.
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

// start opens the subscriber connections; n.mu is held.
func (n *notifier) start() {
	n.stop = make(chan struct{})
	for i, node := range n.c.nodes {
		s := &subscriber{n: n, node: i, ps: node.Subscribe(context.Background()), wake: make(chan struct{}, 1),
			held: map[string]struct{}{}, dirty: map[string]struct{}{}}
		n.nodes = append(n.nodes, s)
		msgs := s.ps.ChannelWithSubscriptions()
		n.wg.Go(func() {
			for m := range msgs {
				switch m := m.(type) {
				case *redis.Message:
					n.deliver(s.node, m.Channel, m.Payload)
				case *redis.Subscription:
					if m.Kind == "subscribe" {
						n.listen(m.Channel)
					}
				}
			}
		})
		n.wg.Go(s.run)
	}
}

// changed tells every node's subscriber that key was added to the wanted
// names (added) or removed from them; n.mu is held.
func (n *notifier) changed(key string, added bool) {
	for _, s := range n.nodes {
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

// run reconciles whenever woken, until the notifier closes.
func (s *subscriber) run() {
	for {
		select {
		case <-s.wake:
		case <-s.n.stop:
			return
		}
		for s.step() {
		}
	}
}

// step sends one batch of subscriptions and unsubscriptions, and reports
// whether dirty keys remain.
func (s *subscriber) step() bool {
	n := s.n
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return false
	}
	var sub, unsub []string
	for key := range s.dirty {
		if len(sub)+len(unsub) == reconcileBatch {
			break
		}
		delete(s.dirty, key)
		want := n.locks[key]
		_, held := s.held[key]
		switch {
		case want != nil && (!held || !want.listening):
			sub = append(sub, key)
		case want == nil && held:
			unsub = append(unsub, key)
		}
	}
	n.mu.Unlock()

	// Errors are left to go-redis, which has recorded the change and
	// applies it on its next connection (see held).
	ctx, cancel := context.WithTimeout(context.Background(), n.c.cfg.nodeTimeout)
	if len(unsub) > 0 {
		_ = s.ps.Unsubscribe(ctx, n.channelsOf(unsub)...)
	}
	if len(sub) > 0 {
		if tr := n.c.cfg.trace; tr != nil && tr.Subscribe != nil {
			tr.Subscribe(s.node)
		}
		_ = s.ps.Subscribe(ctx, n.channelsOf(sub)...)
	}
	cancel()

	n.mu.Lock()
	defer n.mu.Unlock()
	for _, key := range unsub {
		delete(s.held, key)
	}
	for _, key := range sub {
		s.held[key] = struct{}{}
	}
	// The wanted set may have changed while the calls were out.
	for _, keys := range [2][]string{sub, unsub} {
		for _, key := range keys {
			if _, held := s.held[key]; (n.locks[key] != nil) != held {
				s.dirty[key] = struct{}{}
			}
		}
	}
	return len(s.dirty) > 0
}

// channelsOf lists the channels of the lock keys.
func (n *notifier) channelsOf(keys []string) []string {
	channels := make([]string, 0, 2*len(keys))
	for _, key := range keys {
		ch := n.channels(key)
		channels = append(channels, ch[:]...)
	}
	return channels
}
