package waiting

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/fairqueue"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
)

// Failed is what a loop reads of a failed attempt.
type Failed interface {
	error
	// After is the attempt's calls, per node (closed once each ended), or
	// nil: the loop leaves the queues after them.
	After() []chan struct{}
	// Unanswered: the caller's ctx ended the attempt before the nodes
	// said anything.
	Unanswered() bool
	// Over: no further attempt can help (a final kind, or the caller's ctx
	// ended it).
	Over() bool
	// Contended: lost to another owner, not to nodes that failed or did
	// not answer. LostToPromises: lost to promises made to other waiters.
	// SplitVote: some nodes granted it, others refused.
	Contended() bool
	LostToPromises() bool
	SplitVote() bool
	// Ended is the error to return once ctx ended after this attempt;
	// GaveUp, after attempts lost to an outage for lasted.
	Ended(ctx context.Context) error
	GaveUp(lasted time.Duration) error
	// Name is the waiter's name, for warnings; Err the attempt's error
	// itself, which they carry.
	Name() string
	Err() error
}

// Loop is one client's waiting calls: what they share, and what they
// need of the client.
type Loop struct {
	Rounds *round.Engine    // closing, and Close's wait for the waiting calls
	Queue  *fairqueue.Queue // notifications, promises, leaving the queues
	Clock  lease.Clock      // how long a call has waited
	ID     string           // the client's, in its waiters' ids ("<id>/<n>")
	Nodes  int
	Delays Delays
	Log    *slog.Logger // nil: no warnings
	// Failed views an attempt's error, if it is one of a failed attempt;
	// NotTried is the error of a call whose ctx ended before its first.
	Failed   func(err error) (Failed, bool)
	NotTried func(name string, cause error) error

	calls   sync.WaitGroup
	waiters atomic.Uint64
	warns   limiter
}

// Wait waits for the waiting calls to return (Close).
func (lp *Loop) Wait() { lp.calls.Wait() }

// begin counts a waiting call in, unless the client is closing.
func (lp *Loop) begin() bool { return lp.Rounds.IfOpen(func() { lp.calls.Add(1) }) }

// waiter is a new waiter id, with suffix.
func (lp *Loop) waiter(suffix string) string {
	return lp.ID + "/" + strconv.FormatUint(lp.waiters.Add(1), 10) + suffix
}

// Line is where a waiting call waits on the nodes: the queue and
// notifications of Key, its waiters' ids ending in Suffix (a semaphore's
// line reads there what a waiter asks for), the keys a promise it could
// not use is given back on, and the call that takes a waiter that gave up
// out of it.
type Line struct {
	Key, Suffix string
	Yield       []string
	Leave       func(waiter string) *nodescript.Call
}

// gatherPromises waits, after a first promise, until a majority of the
// nodes have promised the lock to w, for a tenth of a node timeout at most.
// The nodes publish their promises as the releases land on them: an attempt
// made on the first one met nodes whose release was still on its way, was
// refused there, and had to be rolled back and made again (2.2 to 2.6
// attempts per contended acquisition, each a round on every node). A
// majority may never come (promises split between waiters, a holder that
// died while unlocking); then the waiter tries anyway, and gives its
// promises back if they were too few. It reports false if ctx ended first.
func (lp *Loop) gatherPromises(ctx context.Context, w *fairqueue.Waiting) bool {
	need := round.Majority(lp.Nodes)
	if lp.Queue.Promises(w) >= need {
		return true
	}
	t := time.NewTimer(lp.Delays.NodeTimeout / 10)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case reason := <-w.Wake():
			if reason != fairqueue.WakePromised || lp.Queue.Promises(w) >= need {
				return true
			}
		}
	}
}

// glance is a random moment soon: a look again after a release that may
// have gone unheard, so that waiters that collided part.
func (lp *Loop) glance() time.Duration {
	return rand.N(max(lp.Delays.NodeTimeout/10, time.Millisecond))
}
