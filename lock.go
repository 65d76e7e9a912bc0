package redlock

import (
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

// Lock is a lock held on a majority of the nodes. Its methods are safe for
// concurrent use.
type Lock struct {
	c *Client
	l lease.Lease // the lease engine's: what the nodes hold, and its deadline
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.l.Name() }

// Nodes returns what each node answered to the acquisition.
func (l *Lock) Nodes() []NodeResult { return append([]NodeResult(nil), l.l.Results()...) }

// Until returns the end of the lock's validity, on the client's monotonic
// clock: compare it with time.Now(), not with a wall-clock time from
// elsewhere. It is start + TTL - drift, start being read before the
// acquisition's first request was sent, TTL being the lock's (For, or the
// client's WithTTL). A successful Extend moves it to the same bound counted
// from the start of the Extend call, with the TTL the Extend applied.
func (l *Lock) Until() time.Time { return l.l.Until() }

// Done returns a channel that is closed when the lock's validity ends
// without a successful Extend, or when the lock is unlocked. Once closed,
// the lock cannot be extended.
//
// It closes a margin before Until: 2% of the lock's TTL, at least 20 ms,
// and at most a tenth of the TTL.
// Timers fire late, by about a millisecond on a loaded machine and by tens
// of milliseconds on a saturated one (measured on 2 cores: up to 15-22 ms
// for a signal to reach a child process), and code that stops on Done
// (Do's function, whose context it cancels, and `redlock exec`'s command,
// which it signals) must have stopped before the validity ends, not just
// begun to.
func (l *Lock) Done() <-chan struct{} { return l.l.Done() }

// Token returns the lock's fencing token: larger than the token of every
// acquisition of the same name that returned before this one began, and
// larger than every token committed before this lock was granted (see
// docs/fencing.md for the exact guarantees). Pass it to the protected
// resource with every operation. It is 0 when fencing is off.
func (l *Lock) Token() uint64 { return l.l.Token() }
