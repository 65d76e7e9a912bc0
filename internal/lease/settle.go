package lease

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/round"
)

// Unlock returns as soon as a majority of the nodes has released the lock;
// its calls to the other nodes go on in the background. Waiting for them
// cost every lock+unlock cycle the spread between the majority's replies
// and the slowest node's (about a fifth of a cycle over five local nodes).
//
// One caller can tell the difference: this client taking the same name
// again at once. A node whose release is still in flight holds the old
// value and refuses it; with a hung node skipped as well (three nodes, one
// paused), that refusal costs the attempt its majority, and TryLock fails
// with ErrLocked on a lock that nobody holds. So the client remembers each
// name's releases still in flight, and its next attempt on that name first
// waits for them, for no longer than Unlock used to wait for them
// (settleBy); then each node's call of the attempt goes after the
// release's call on that node however long that takes (afterOwn), so a
// node never refuses the attempt for the client's own old value. Other
// clients are not ordered after an Unlock anyway, so they need no such
// wait.

// settleBy is when this client's next attempt on a name stops waiting for
// the rest of the name's release, won at the majority in the round that
// started at start (settle.go). It is what Unlock waited itself when it
// still waited for them: a grace after the majority's last reply, so that
// the attempt does not find the old value on a healthy node that was a
// little slower, and never past the time the collector gives up on silent
// nodes (round.Engine.Run).
func (e *Engine) settleBy(t *round.Tally, start time.Time) time.Time {
	by := t.LastReply.Add(e.Rounds.Grace(t))
	giveUp := t.LastReply.Add(max(e.NodeTimeout, t.Slowest))
	if hard := start.Add(e.NodeTimeout); hard.After(giveUp) {
		giveUp = hard
	}
	if last := start.Add(e.Patience); last.Before(giveUp) {
		giveUp = last
	}
	if giveUp.Before(by) {
		return giveUp
	}
	return by
}

// settling is the releases of this client still in flight, by lock name.
// A name usually has one; an Unlock of an expired handle, after the name
// was taken and released again, adds another.
type settling struct {
	mu sync.Mutex
	m  map[string][]*release
	// retrying counts, per name and node, this client's releases and
	// rollbacks of the name whose call there failed and that are retried
	// in the background: the node may still hold the client's own old
	// value, and refuse the client's next attempt with it.
	retrying map[string][]int
}

// retryStart and retryEnd bracket a background retry of a release of
// names on node i (of n).
func (s *settling) retryStart(n, i int, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retrying == nil {
		s.retrying = map[string][]int{}
	}
	for _, name := range names {
		if s.retrying[name] == nil {
			s.retrying[name] = make([]int, n)
		}
		s.retrying[name][i]++
	}
}

func (s *settling) retryEnd(i int, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		c := s.retrying[name]
		if c[i]--; !slices.ContainsFunc(c, func(k int) bool { return k > 0 }) {
			delete(s.retrying, name)
		}
	}
}

// retryingAt reports whether a release of one of names is retried on node
// i: the node may hold this client's own old value there.
func (s *settling) retryingAt(i int, names ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		if c := s.retrying[name]; c != nil && c[i] > 0 {
			return true
		}
	}
	return false
}

// release is one Unlock's calls still in flight.
type release struct {
	calls   atomic.Int32    // not yet ended
	settled chan struct{}   // closed when the last call ends
	nodes   []chan struct{} // per node: closed when the call there ends
	// until is when (round.Engine.Since) waiting for the rest stops being worth
	// it; 0 while the Unlock has not returned, and for ever if the Unlock
	// did not win (there was no majority to keep it from).
	until atomic.Int64
}

// start records that name's release is going out to n nodes.
func (s *settling) start(n int, names ...string) *release {
	r := &release{settled: make(chan struct{}), nodes: make([]chan struct{}, n)}
	for i := range r.nodes {
		r.nodes[i] = make(chan struct{})
	}
	r.calls.Store(int32(n))
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string][]*release)
	}
	for _, name := range names {
		s.m[name] = append(s.m[name], r)
	}
	s.mu.Unlock()
	return r
}

// callEnded is run once per node as its release call there ends.
func (s *settling) callEnded(r *release, node int, names ...string) {
	close(r.nodes[node])
	if r.calls.Add(-1) != 0 {
		return
	}
	close(r.settled)
	s.forget(r, names...)
}

// forget drops r: it settled, or sent nothing (the client was closed).
func (s *settling) forget(r *release, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		rs := slices.DeleteFunc(s.m[name], func(x *release) bool { return x == r })
		if len(rs) == 0 {
			delete(s.m, name)
		} else {
			s.m[name] = rs
		}
	}
}

// pending reports whether name has releases of this client in flight.
func (s *settling) pending(names ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		if len(s.m[name]) > 0 {
			return true
		}
	}
	return false
}

// inFlight returns name's releases of this client in flight, for an
// attempt to order its call on each node after theirs (afterOwn), and
// whether a release of one of names is retried on some node.
func (s *settling) inFlight(names ...string) (rs []*release, retrying bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		retrying = retrying || s.retrying[name] != nil
	}
	if len(names) == 1 {
		return slices.Clone(s.m[names[0]]), retrying
	}
	for _, name := range names {
		for _, r := range s.m[name] {
			if !slices.Contains(rs, r) {
				rs = append(rs, r)
			}
		}
	}
	return rs, retrying
}

// sending records, as attempt l's call goes out to node i, whether a
// release of its name is retried there: a refusal may then be this
// client's own old value (ownRefusalsDecided), even if the retry gets
// through before the attempt is decided. A retry that starts later
// belongs to a release that was not in flight when the attempt began
// (afterOwn orders the call after those, and their retries start before
// their calls end), so there is nothing to look at if none was in flight
// or retried then; and a retry that got through before the call went out
// is no evidence either (the node had applied it).
func (l *Lease) sending(i int) {
	if l.ownRetried != nil && l.e.settling.retryingAt(i, l.names...) {
		l.ownRetried[i].Store(true)
	}
}

// afterOwn waits until this client's releases of the name that were in
// flight when attempt l began (Lease.ownReleases) have ended on node i, or
// ctx ends; it returns ctx's error in the last case. An attempt's call on
// a node runs after it.
//
// wait bounds the attempt's wait for them all by the time the majority's
// replies make it worth, but a node's release can take longer (a node or
// machine overloaded: 2 in 12,144 attempts at 64 goroutines, 21 in 10,344
// at 256). The call that overtook it found the old value and was refused,
// and with the other late nodes given up on, TryLock failed with ErrLocked
// on a name nobody else held. Ordered after it, the call finds the lock
// gone, and a late release costs that node's reply time, not the attempt.
// The wait is bounded by the release's own call, which ends within the
// round's patience (or a node timeout, for a rollback's first try, and its
// second if the first timed out: retryRelease), and by ctx. A release the
// node did not apply (a broken connection: it is retried in the
// background) still leaves the old value to refuse.
func (l *Lease) afterOwn(ctx context.Context, i int) error {
	for _, r := range l.ownReleases {
		select {
		case <-r.nodes[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// ownEnded reports whether afterOwn would return at once.
func (l *Lease) ownEnded(i int) bool {
	for _, r := range l.ownReleases {
		select {
		case <-r.nodes[i]:
		default:
			return false
		}
	}
	return true
}

// wait waits until name's releases in flight have settled or reached their
// until, or ctx ends; it returns ctx's error in the last case. epoch is
// the round engine's. Releases whose Unlock has not returned (a TryLock racing
// an Unlock of the same name has no order to keep) or did not win are not
// waited for. Neither is anything if ctx ends before the wait would: the
// attempt is better sent at once, and may well win without those nodes.
func (s *settling) wait(ctx context.Context, epoch time.Time, names ...string) error {
	rs, _ := s.inFlight(names...)
	if len(rs) == 0 {
		return nil
	}
	now := int64(time.Since(epoch))
	last := int64(0)
	rs = slices.DeleteFunc(rs, func(r *release) bool {
		until := r.until.Load()
		last = max(last, until)
		return until <= now
	})
	if len(rs) == 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && int64(dl.Sub(epoch)) < last {
		return nil
	}
	for _, r := range rs {
		t := time.NewTimer(time.Duration(r.until.Load() - int64(time.Since(epoch))))
		select {
		case <-r.settled:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
	return nil
}

// SettlingLen is how many names the engine still records a release in
// flight for: the tests' leak checks read it.
func (e *Engine) SettlingLen() int {
	e.settling.mu.Lock()
	defer e.settling.mu.Unlock()
	return len(e.settling.m)
}
