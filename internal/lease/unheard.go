package lease

import (
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/round"
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
// (effectiveTTL). Calls of equal or longer TTL (Do's keep-alive repeating
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

// effectiveTTL is the TTL that a majority of the nodes that granted the
// extension t (of TTL ttl) keep at least: the majority-th longest of their
// TTLs, each cut to the shortest call still unheard on that node.
func (u *unheardCalls) effectiveTTL(t *round.Tally, ttl time.Duration) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ttls == nil {
		return ttl
	}
	var kept []time.Duration
	for i, r := range t.Results {
		if r.Outcome == round.NodeGranted {
			kept = append(kept, u.shortest(i, ttl))
		}
	}
	if len(kept) < t.Majority {
		return 0
	}
	slices.Sort(kept)
	return kept[len(kept)-t.Majority]
}
