package lease

import (
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// An extension call that the lease has not heard back from may still run
// on its node, at any later time (a paused node applies what it had
// buffered when it resumes; a delayed packet arrives when it arrives), and
// it sets the key's TTL from the moment it runs. If it carries a shorter
// TTL than a later extension that succeeded, it cuts that extension short
// on its node: A extends for 400 ms and hears nothing from n1, extends for
// 3 s on {n0, n1}, then the 400 ms call lands on n1 and B takes {n1, n2}
// while A believes it holds the lock for 3 s more.
//
// Whatever order they run in, a node that granted an extension of TTL t
// started at s holds the key until at least s + min(t, u) on its clock, u
// being the shortest TTL of the calls still unheard on it: one that runs
// before the granted call is overwritten by it, one that runs after it
// runs after s. So a successful extension counts each granted node for that
// shorter TTL, and the lease's validity is what a majority of them keep
// (effectiveTTL). u is taken over the calls unheard when the extension
// began (shortestNow), not when it ends: a late call may run on its node
// after the granted one and have its reply heard before the granted
// one's, and it cuts the extension all the same. Calls of equal or longer TTL (Do's keep-alive repeating
// one TTL) change nothing. An unheard call is never forgotten: nothing
// tells the client it will not land.

// unheardCalls counts, per node, the TTLs of the extension calls sent to
// it whose reply never came.
type unheardCalls struct {
	mu   sync.Mutex
	ttls []map[time.Duration]int // per node: TTL -> calls; nil until the first Extend
}

// sent records a call of ttl to node i, before it is sent.
func (u *unheardCalls) sent(n, i int, ttl time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ttls == nil {
		u.ttls = make([]map[time.Duration]int, n)
	}
	if u.ttls[i] == nil {
		u.ttls[i] = map[time.Duration]int{}
	}
	u.ttls[i][ttl]++
}

// heard records that the call of ttl to node i has run there: its reply
// came.
func (u *unheardCalls) heard(i int, ttl time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ttls[i][ttl]--; u.ttls[i][ttl] <= 0 {
		delete(u.ttls[i], ttl)
	}
}

// shortest is the shortest TTL still unheard on node i, or ttl if there is
// none shorter.
func (u *unheardCalls) shortest(i int, ttl time.Duration) time.Duration {
	if u.ttls == nil {
		return ttl
	}
	for t := range u.ttls[i] {
		ttl = min(ttl, t)
	}
	return ttl
}

// count records the calls unheard once: a call with ttl to node i that
// returned o and err after took, sent unless ctx had ended first.
func (u *unheardCalls) count(n, i int, ttl time.Duration) (done func(node redis.UniversalClient, o round.Outcome, err error, took time.Duration)) {
	u.sent(n, i, ttl)
	return func(node redis.UniversalClient, o round.Outcome, err error, took time.Duration) {
		if landed(node, o, err, took) {
			u.heard(i, ttl)
		}
	}
}

// shortestNow is, per node, the shortest TTL of the calls unheard on it
// now (0: none), or nil if there are none anywhere.
func (u *unheardCalls) shortestNow(n int) []time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	var cut []time.Duration
	for i, ttls := range u.ttls {
		for t := range ttls {
			if cut == nil {
				cut = make([]time.Duration, n)
			}
			if cut[i] == 0 || t < cut[i] {
				cut[i] = t
			}
		}
	}
	return cut
}

// effectiveTTL is the TTL that a majority of the nodes that granted the
// extension t (of TTL ttl) keep at least: the majority-th longest of their
// TTLs, each cut to the shortest call unheard on that node when t began
// (atStart, from shortestNow) or still unheard now.
func (u *unheardCalls) effectiveTTL(t *round.Tally, ttl time.Duration, atStart []time.Duration) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	var kept []time.Duration
	for i, r := range t.Results {
		if r.Outcome != round.NodeGranted {
			continue
		}
		k := u.shortest(i, ttl)
		if atStart != nil && atStart[i] > 0 {
			k = min(k, atStart[i])
		}
		kept = append(kept, k)
	}
	if len(kept) < t.Majority {
		return 0
	}
	slices.Sort(kept)
	return kept[len(kept)-t.Majority]
}

// resentAfter is how long a call to node may wait for its reply before
// go-redis gives up on that copy and sends the command again (its
// MaxRetries, after a ReadTimeout): a reply that took that long may be a
// later copy's, and the first copy may still land. 0: never (retries or
// read timeouts off). Clients of other types count as resending at once.
func resentAfter(node redis.UniversalClient) time.Duration {
	var retries int
	var read time.Duration
	switch n := node.(type) {
	case *redis.Client:
		o := n.Options()
		retries, read = o.MaxRetries, o.ReadTimeout
	case *redis.ClusterClient:
		o := n.Options()
		retries, read = o.MaxRetries, o.ReadTimeout
	case *redis.Ring:
		o := n.Options()
		retries, read = o.MaxRetries, o.ReadTimeout
	default:
		return time.Nanosecond
	}
	switch {
	case retries < 0 || read < 0:
		return 0
	case read == 0:
		return 3 * time.Second // go-redis's default
	}
	return read
}

// landed tells whether an extension call that returned o and err after
// took has run on its node for good, so that nothing of it can land later:
// its reply came, and no earlier copy of it can be on the way (resentAfter);
// or it was never sent (a dial that failed, a batch it never left).
func landed(node redis.UniversalClient, o round.Outcome, err error, took time.Duration) bool {
	if err != nil && notSent(err) {
		return true
	}
	if o != round.NodeGranted && o != round.NodeRefused && err != errNotChecked {
		return false
	}
	r := resentAfter(node)
	return r == 0 || took < r
}

// notSent: err says the command never left the client.
func notSent(err error) bool {
	var ns interface{ NotSent() bool }
	if errors.As(err, &ns) && ns.NotSent() {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
