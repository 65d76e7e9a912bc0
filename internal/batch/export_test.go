package batch

import "time"

// Queued is how many calls wait for a batch: a test knows from it that a
// batch has left.
func (l *Link) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// State is the link's state, for tests that follow it.
func (l *Link) State() (inFlight int, rtt, patience time.Duration, queued int, armed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight, l.rtt, l.patience(), len(l.queue), l.armed
}

// Left reports whether p's batch has taken it: Unsend is then too late.
func (p *Pending) Left() bool { return p.state.Load() == sent }
