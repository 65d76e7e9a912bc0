package redlock

import (
	cryptorand "crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
)

// Lock is a lock held on a majority of the nodes. Its methods are safe for
// concurrent use.
type Lock struct {
	c       *Client
	name    string
	key     string // the lock key, "<prefix>:{<name>}"
	marker  string // the release marker of this value
	value   string // random, unique to this acquisition
	lease   lease  // the acquisition's TTL (For, or the client's)
	results []NodeResult
	token   uint64
	waiter  string    // the Lock call's id in the lock's queue, or ""
	list    *listView // the node list check its votes count by
	idsMu   sync.Mutex
	ids     []int // per node: the id round 1 admitted it with, beyond the check's (listView.admit)

	keyArgs  []any            // key, marker and the queue's keys, boxed for the scripts
	valueArg any              // value, boxed
	acquire  *nodescript.Call // round 1, the same for every node
	// Unlock's release call, built on first use: [sure], see releaseCall.
	unlockCalls [2]struct {
		once sync.Once
		call *nodescript.Call
	}

	// per node: closed once the acquisition call on that node has returned;
	// acqOutcome[i] is valid after that.
	acqDone    []chan struct{}
	acqOutcome []Outcome
	acqSent    []bool // false: the node was hung, and nothing was sent
	// per node: closed once the first release after a failed attempt was
	// tried. Made by abandon, before the verdict that the rollbacks wait for.
	rollbackTried []chan struct{}
	rollbacks     *release   // the rollbacks in flight, for this client's next attempt (settle.go)
	ownInFlight   bool       // this client had a release of the name in flight when the attempt began
	ownReleases   []*release // those releases: the call on each node goes after theirs (afterOwn)
	// closed when the attempt is decided; success is set before.
	verdict chan struct{}
	success bool
	// nodes that refused only because the free lock was promised to
	// another waiter (see yieldPromise)
	promisedElsewhere atomic.Int32

	// one Extend at a time (see Extend): holds a token while one runs
	extending chan struct{}
	// signalled when an Extend changed the TTL: Do's keep-alive re-arms
	ttlMoved chan struct{}

	mu       sync.Mutex
	ttl      time.Duration // the TTL last applied: the lease's, or the last successful Extend's
	until    time.Time
	timer    timer
	released bool
	done     chan struct{}
	doneOnce sync.Once

	unlockOnce sync.Once
	unlockErr  error
}

func (c *Client) newLock(name string, ls lease) *Lock {
	n := len(c.nodes)
	key, queue, seen := lockKeys(c.cfg.keyPrefix, name)
	value := newValue()
	l := &Lock{
		c:          c,
		name:       name,
		key:        key,
		value:      value,
		lease:      ls,
		ttl:        ls.ttl,
		acqDone:    make([]chan struct{}, n),
		acqOutcome: make([]Outcome, n),
		acqSent:    make([]bool, n),
		verdict:    make(chan struct{}),
		done:       make(chan struct{}),
		extending:  make(chan struct{}, 1),
		ttlMoved:   make(chan struct{}, 1),
	}
	for i := range n {
		l.acqDone[i] = make(chan struct{})
	}
	l.marker = markerKey(key, value)
	l.keyArgs = nodescript.BoxKeys(key, l.marker, nextKey(key), queue, seen)
	l.valueArg = value
	return l
}

// newValue returns a random lock value: 128 bits, hex-encoded, made with
// one allocation (uuid.NewString takes two, and this is on every attempt).
func newValue() string {
	var raw [16]byte
	var text [32]byte
	_, _ = cryptorand.Read(raw[:]) // never fails (crypto/rand.Read's contract)
	hex.Encode(text[:], raw[:])
	return string(text[:])
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Nodes returns what each node answered to the acquisition.
func (l *Lock) Nodes() []NodeResult { return append([]NodeResult(nil), l.results...) }

// Until returns the end of the lock's validity, on the client's monotonic
// clock: compare it with time.Now(), not with a wall-clock time from
// elsewhere. It is start + TTL - drift, start being read before the
// acquisition's first request was sent, TTL being the lock's (For, or the
// client's WithTTL). A successful Extend moves it to the same bound counted
// from the start of the Extend call, with the TTL the Extend applied.
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

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
func (l *Lock) Done() <-chan struct{} { return l.done }

// doneIn is how long from now Done closes for a validity ending at until,
// under a TTL of ttl.
func (l *Lock) doneIn(until time.Time, ttl time.Duration) time.Duration {
	return until.Sub(l.c.cfg.clock.Now()) - stopMargin(ttl)
}

// currentTTL is the TTL last applied to l.
func (l *Lock) currentTTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

func (l *Lock) remaining() time.Duration {
	return l.Until().Sub(l.c.cfg.clock.Now())
}

func (l *Lock) closeDone() { l.doneOnce.Do(func() { close(l.done) }) }

// Token returns the lock's fencing token: larger than the token of every
// acquisition of the same name that returned before this one began, and
// larger than every token committed before this lock was granted (see
// docs/fencing.md for the exact guarantees). Pass it to the protected
// resource with every operation. It is 0 when fencing is off.
func (l *Lock) Token() uint64 { return l.token }
