package fairqueue

import (
	"slices"
	"strings"
	"time"
)

// subscriptionLinger is how long a channel stays subscribed after its last
// waiter left. A client that takes the same lock again and again would
// otherwise SUBSCRIBE and UNSUBSCRIBE on every node for every wait, and miss
// the releases that come while the subscription is being made.
const subscriptionLinger = 2 * time.Second

// WakeReason is what a notification tells a waiter.
type WakeReason int

const (
	// WakeReleased: the lock was released and promised to nobody, so every
	// waiter may try.
	WakeReleased WakeReason = iota
	// WakePromised: the lock is promised to this waiter; it should try at
	// once.
	WakePromised
	// WakeListening: the subscription has just taken effect; a release may
	// have come before it, so look once.
	WakeListening
)

// ObserverPrefix begins the payloads that are news for observers, not a
// promise to a waiter: "~leader", which an election's Proclaim publishes.
const ObserverPrefix = "~"

// subscription is the two channels of one lock key.
type subscription struct {
	waiters []*Waiting // oldest first
	// listening: a node has confirmed the subscription.
	listening bool
	// linger, while nobody waits, ends the subscription when it fires.
	linger *time.Timer
}

// Waiting is one Lock call waiting for a name, or one watching it.
type Waiting struct {
	id   string
	wake chan WakeReason // holds at most one pending notification
	// watcher: it wakes at every release promised to nobody (Watch).
	watcher bool
	// promisedAt is when each node last promised the lock to this waiter,
	// zero if none has since the waiter gave its promises back; q.mu.
	promisedAt []time.Time
}

// subscriptionOf is the subscription a channel of this client belongs to,
// or nil; q.mu is held.
func (q *Queue) subscriptionOf(channel string) *subscription {
	key, ok := strings.CutSuffix(channel, releasedSuffix)
	if !ok {
		key, ok = strings.CutSuffix(channel, promisedInfix+q.cfg.ID)
	}
	if !ok {
		return nil
	}
	return q.locks[key]
}

// Subscribed reports whether the client subscribes to key's channels
// already (for another waiter, or lingering after one).
func (q *Queue) Subscribed(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.locks[key] != nil
}

// Register registers the waiter id for key's release notifications, and
// subscribes to them if the client does not yet. The returned Waiting's
// Wake channel receives the (coalesced) notifications; call the cancel func
// when done.
// listening reports whether a node had confirmed the subscription already:
// if not, a WakeListening notification follows when one does.
func (q *Queue) Register(key, id string) (_ *Waiting, cancel func(), listening bool) {
	return q.register(key, &Waiting{id: id, wake: make(chan WakeReason, 1)})
}

// Watch is Register for a call that waits on several keys or in no queue
// (a reader behind a writer: id ""; a multi-lock, in each member's queue
// as id): it is woken, on wake (which may serve several keys; give it room
// for one), by every release of key that promises the lock to nobody, as
// every client's oldest queued waiter is, and by a promise to id.
func (q *Queue) Watch(key, id string, wake chan WakeReason) (cancel func(), listening bool) {
	_, cancel, listening = q.register(key, &Waiting{id: id, wake: wake, watcher: true})
	return cancel, listening
}

func (q *Queue) register(key string, w *Waiting) (_ *Waiting, cancel func(), listening bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return w, func() {}, false
	}
	if q.subs == nil {
		q.start()
	}
	if q.locks == nil {
		q.locks = map[string]*subscription{}
	}
	sub := q.locks[key]
	if sub == nil {
		sub = &subscription{}
		q.locks[key] = sub
		q.changed(key, true)
	}
	if sub.linger != nil {
		sub.linger.Stop()
		sub.linger = nil
	}
	sub.waiters = append(sub.waiters, w)
	return w, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		sub.waiters = slices.DeleteFunc(sub.waiters, func(x *Waiting) bool { return x == w })
		if len(sub.waiters) > 0 || q.closed || q.locks[key] != sub {
			return
		}
		sub.linger = time.AfterFunc(subscriptionLinger, func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			// A waiter that came as this fired keeps the subscription.
			if len(sub.waiters) == 0 && !q.closed && q.locks[key] == sub {
				delete(q.locks, key)
				q.changed(key, false)
			}
		})
	}, sub.listening
}

// deliver wakes the waiter the lock was promised to by the node, if it is
// one of this client's; on an empty payload, this client's oldest queued
// waiter for the lock and every watcher. Every node publishes the same
// release: the first wakes, the rest coalesce, and a promise is counted
// for its node (Promises).
func (q *Queue) deliver(node int, channel, promisedTo string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	sub := q.subscriptionOf(channel)
	if sub == nil || len(sub.waiters) == 0 {
		return
	}
	if promisedTo == "" {
		oldest := true
		for _, w := range sub.waiters {
			if w.watcher || oldest {
				w.notify(WakeReleased)
				oldest = oldest && w.watcher
			}
		}
		return
	}
	if strings.HasPrefix(promisedTo, ObserverPrefix) {
		// News for observers (an election's new leader): every watcher
		// registered under that id looks; no waiter has such an id.
		for _, w := range sub.waiters {
			if w.watcher && w.id == promisedTo {
				w.notify(WakeReleased)
			}
		}
		return
	}
	i := slices.IndexFunc(sub.waiters, func(x *Waiting) bool { return x.id == promisedTo })
	if i < 0 {
		return // promised to another client's waiter
	}
	w := sub.waiters[i]
	if w.promisedAt == nil {
		w.promisedAt = make([]time.Time, len(q.nodes))
	}
	w.promisedAt[node] = q.cfg.Clock.Now()
	w.notify(WakePromised)
}

// Promises counts the nodes whose promise to w still holds there: younger
// than the promise's lifetime (Config.PromiseLife, the client's promiseFor).
func (q *Queue) Promises(w *Waiting) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	now, k := q.cfg.Clock.Now(), 0
	for _, at := range w.promisedAt {
		if !at.IsZero() && now.Sub(at) < q.cfg.PromiseLife {
			k++
		}
	}
	return k
}

// ForgetPromises drops w's promises once it has given them back (Yield).
func (q *Queue) ForgetPromises(w *Waiting) {
	q.mu.Lock()
	defer q.mu.Unlock()
	clear(w.promisedAt)
}

// Wake receives the waiter's notifications: at most one is pending.
func (w *Waiting) Wake() <-chan WakeReason { return w.wake }

// notify leaves reason for the waiter. A pending notification is replaced
// only by a promise, which says the most.
func (w *Waiting) notify(reason WakeReason) {
	select {
	case w.wake <- reason:
		return
	default:
	}
	if reason != WakePromised {
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
func (q *Queue) listen(channel string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	sub := q.subscriptionOf(channel)
	if sub == nil || sub.listening {
		return
	}
	sub.listening = true
	for _, w := range sub.waiters {
		w.notify(WakeListening)
	}
}

// Close stops the subscribers and closes their connections. It does not
// wait: a connection stuck on a node that does not answer would hold it.
// Wait waits for what is still running.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	for _, sub := range q.locks {
		if sub.linger != nil {
			sub.linger.Stop()
		}
	}
	if q.subs == nil {
		return
	}
	close(q.stop)
	for _, s := range q.subs {
		// Close takes the PubSub's lock, which a SUBSCRIBE or a reconnect
		// stuck on the node holds.
		q.wg.Go(func() { s.ps.Close() })
	}
	q.subs = nil
}
