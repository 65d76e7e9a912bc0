package redlock

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Release notifications: a waiter in Lock wakes when the lock is released
// instead of sleeping out its retry delay (Redisson does the same).
//
// When Unlock deletes the lock, the release script promises it to the
// oldest waiter (queueLua in queue.go) and PUBLISHes that waiter's id on
// "<key>:promised:<client id>", which only the waiter's own client hears,
// or "" on "<key>:released", which every waiting client hears, when nobody
// waits. Each client keeps one subscriber connection per node, shared by all
// of its waiters, subscribed to both channels of the names being waited
// for. A message naming a waiter wakes that waiter only; an empty one wakes
// the client's oldest waiter for the name, which then retries after a delay
// that shrinks with how long it has waited. Notifications are a hint: a
// lost one costs only the jittered retry delay, which stays in place as the
// fallback. Rollbacks of failed attempts do not notify, or every failed
// attempt would wake the others into another round of split votes.
//
// What a node is subscribed to follows what the client wants: the lock keys
// with waiters or a lingering subscription (notifier.locks). Each node's
// subscriber brings its connection in line with that set in its own
// goroutine (subscriber.go), so a slow or paused node delays only its own
// subscriptions, and no request is ever dropped.

// handoffSpread bounds the age-priority delay of a woken waiter.
const handoffSpread = 2 * time.Millisecond

// subscriptionLinger is how long a channel stays subscribed after its last
// waiter left. A client that takes the same lock again and again would
// otherwise SUBSCRIBE and UNSUBSCRIBE on every node for every wait, and miss
// the releases that come while the subscription is being made.
const subscriptionLinger = 2 * time.Second

// wakeDelay is how long a waiter that has waited for age lets others go
// first after a notification: handoffSpread for a newcomer, near zero for a
// waiter that has waited long.
func wakeDelay(age time.Duration) time.Duration {
	return time.Duration(float64(handoffSpread) / (1 + float64(age)/float64(10*time.Millisecond)))
}

// wakeReason is what a notification tells a waiter.
type wakeReason int

const (
	// wakeReleased: the lock was released and promised to nobody, so every
	// waiter may try.
	wakeReleased wakeReason = iota
	// wakePromised: the lock is promised to this waiter; it should try at
	// once.
	wakePromised
	// wakeListening: the subscription has just taken effect; a release may
	// have come before it, so look once.
	wakeListening
)

// notifier is a client's subscriber connections.
type notifier struct {
	c *Client

	mu    sync.Mutex
	nodes []*subscriber // one per node, started on first use
	// locks, by lock key, holds the names whose channels the client wants
	// subscribed: the subscriptions of its waiters, and lingering ones.
	locks  map[string]*subscription
	closed bool
	stop   chan struct{} // closed by close: the subscribers stop
	wg     sync.WaitGroup
}

// subscription is the two channels of one lock key.
type subscription struct {
	waiters []*waiting // oldest first
	// listening: a node has confirmed the subscription.
	listening bool
	// linger, while nobody waits, ends the subscription when it fires.
	linger *time.Timer
}

// waiting is one Lock call waiting for a name.
type waiting struct {
	id   string
	wake chan wakeReason // holds at most one pending notification
	// promisedAt is when each node last promised the lock to this waiter,
	// zero if none has since the waiter gave its promises back; n.mu.
	promisedAt []time.Time
}

// subscriptionOf is the subscription a channel of this client belongs to,
// or nil; n.mu is held.
func (n *notifier) subscriptionOf(channel string) *subscription {
	key, ok := strings.CutSuffix(channel, releasedSuffix)
	if !ok {
		key, ok = strings.CutSuffix(channel, promisedInfix+n.c.id)
	}
	if !ok {
		return nil
	}
	return n.locks[key]
}

// subscribed reports whether the client subscribes to key's channels
// already (for another waiter, or lingering after one).
func (n *notifier) subscribed(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.locks[key] != nil
}

// wait registers the waiter id for key's release notifications, and
// subscribes to them if the client does not yet. The returned channel
// receives the (coalesced) notifications; call the cancel func when done.
// listening reports whether a node had confirmed the subscription already:
// if not, a wakeListening notification follows when one does.
func (n *notifier) wait(key, id string) (_ *waiting, cancel func(), listening bool) {
	w := &waiting{id: id, wake: make(chan wakeReason, 1)}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return w, func() {}, false
	}
	if n.nodes == nil {
		n.start()
	}
	if n.locks == nil {
		n.locks = map[string]*subscription{}
	}
	sub := n.locks[key]
	if sub == nil {
		sub = &subscription{}
		n.locks[key] = sub
		n.changed(key, true)
	}
	if sub.linger != nil {
		sub.linger.Stop()
		sub.linger = nil
	}
	sub.waiters = append(sub.waiters, w)
	return w, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		sub.waiters = slices.DeleteFunc(sub.waiters, func(x *waiting) bool { return x == w })
		if len(sub.waiters) > 0 || n.closed || n.locks[key] != sub {
			return
		}
		sub.linger = time.AfterFunc(subscriptionLinger, func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			// A waiter that came as this fired keeps the subscription.
			if len(sub.waiters) == 0 && !n.closed && n.locks[key] == sub {
				delete(n.locks, key)
				n.changed(key, false)
			}
		})
	}, sub.listening
}

// deliver wakes the waiter the lock was promised to by the node, if it is
// one of this client's; on an empty payload, this client's oldest waiter
// for the lock. Every node publishes the same release: the first wakes, the
// rest coalesce, and a promise is counted for its node (promises).
func (n *notifier) deliver(node int, channel, promisedTo string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.subscriptionOf(channel)
	if sub == nil || len(sub.waiters) == 0 {
		return
	}
	w, reason := sub.waiters[0], wakeReleased
	if promisedTo != "" {
		i := slices.IndexFunc(sub.waiters, func(x *waiting) bool { return x.id == promisedTo })
		if i < 0 {
			return // promised to another client's waiter
		}
		w, reason = sub.waiters[i], wakePromised
		if w.promisedAt == nil {
			w.promisedAt = make([]time.Time, len(n.c.nodes))
		}
		w.promisedAt[node] = n.c.cfg.clock.Now()
	}
	w.notify(reason)
}

// promises counts the nodes whose promise to w still holds there: younger
// than the promise's lifetime (promiseFor).
func (n *notifier) promises(w *waiting) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	now, k := n.c.cfg.clock.Now(), 0
	for _, at := range w.promisedAt {
		if !at.IsZero() && now.Sub(at) < n.c.promiseLife() {
			k++
		}
	}
	return k
}

// forgetPromises drops w's promises once it has given them back (yield).
func (n *notifier) forgetPromises(w *waiting) {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(w.promisedAt)
}

// notify leaves reason for the waiter. A pending notification is replaced
// only by a promise, which says the most.
func (w *waiting) notify(reason wakeReason) {
	select {
	case w.wake <- reason:
		return
	default:
	}
	if reason != wakePromised {
		return
	}
	select {
	case <-w.wake:
	default:
	}
	select {
	case w.wake <- reason:
	default:
	}
}

// listen wakes the channel's waiters when the first node confirms their
// subscription. A waiter subscribes after an attempt was refused, and the
// lock may have been released, and promised to it, before the subscription
// took effect: without this look, such a waiter would sleep out its retry
// delay while the lock waits for it. After the confirmation, releases reach
// it.
func (n *notifier) listen(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.subscriptionOf(channel)
	if sub == nil || sub.listening {
		return
	}
	sub.listening = true
	for _, w := range sub.waiters {
		w.notify(wakeListening)
	}
}

// close stops the subscribers and closes their connections. It does not
// wait: a connection stuck on a node that does not answer would hold it.
// n.wg counts what is still running.
func (n *notifier) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	for _, sub := range n.locks {
		if sub.linger != nil {
			sub.linger.Stop()
		}
	}
	if n.nodes == nil {
		return
	}
	close(n.stop)
	for _, s := range n.nodes {
		// Close takes the PubSub's lock, which a SUBSCRIBE or a reconnect
		// stuck on the node holds.
		n.wg.Go(func() { s.ps.Close() })
	}
	n.nodes = nil
}
