package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
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
// name whose release is still settling, and its next attempt on that name
// first waits for the release, for no longer than Unlock used to wait for
// it: a grace after the majority's last reply (waitForStragglers). Other
// clients are not ordered after an Unlock anyway, so they need no such wait.

// settling is the releases of this client still in flight, by lock name.
type settling struct {
	mu sync.Mutex
	m  map[string]*release
}

// release is one Unlock's calls still in flight.
type release struct {
	calls   atomic.Int32  // not yet ended
	settled chan struct{} // closed when the last call ends
	// until is when (Client.since) waiting for the rest stops being worth
	// it; 0 while the Unlock has not returned.
	until atomic.Int64
}

// start records that name's release is going out to n nodes.
func (s *settling) start(name string, n int) *release {
	r := &release{settled: make(chan struct{})}
	r.calls.Store(int32(n))
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string]*release)
	}
	s.m[name] = r
	s.mu.Unlock()
	return r
}

// callEnded is run once per node as its release call ends.
func (s *settling) callEnded(name string, r *release) {
	if r.calls.Add(-1) != 0 {
		return
	}
	close(r.settled)
	s.abandon(name, r)
}

// abandon forgets a release that sent nothing (the client was closed).
func (s *settling) abandon(name string, r *release) {
	s.mu.Lock()
	if s.m[name] == r {
		delete(s.m, name)
	}
	s.mu.Unlock()
}

// wait waits for name's release in flight, if any, to settle, to reach its
// until, or for ctx to end, whichever is first; it returns ctx's error in
// the last case. now is Client.since's reading. A release whose Unlock has
// not returned yet is not waited for: a TryLock racing an Unlock of the
// same name has no order to keep.
func (s *settling) wait(ctx context.Context, name string, now int64) error {
	s.mu.Lock()
	r := s.m[name]
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	until := r.until.Load()
	if until == 0 {
		return nil
	}
	d := time.Duration(until - now)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.settled:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
