package lease

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/identity"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
)

// Term is a lease's TTL, and its milliseconds boxed once for the scripts.
type Term struct {
	TTL time.Duration
	Arg any
}

// Lease is one acquisition attempt and, once won, the lease held on a
// majority of the nodes. Its methods are safe for concurrent use.
type Lease struct {
	e       *Engine
	name    string
	names   []string  // what settling is kept under: name, or a multi-lock's members (Request.Names)
	name1   [1]string // names for one name, without an allocation
	value   string    // the random value the lease holds on the nodes
	shape   Shape     // what the primitive puts on each node for this lease's random value
	mutex   mutex     // the mutex's shape, when it is one: kept here, it costs no allocation
	term    Term      // the acquisition's TTL (For, or the client's)
	results []round.NodeResult
	token   uint64
	waiter  string         // the Lock call's id in the lock's queue, or ""
	list    *identity.View // the node list check its votes count by
	idsMu   sync.Mutex
	ids     []int // per node: the id round 1 admitted it with, beyond the check's (Lease.admit)

	acquire *nodescript.Call // round 1, the same for every node
	// The release call, built on first use: [sure], see releaseCall.
	unlockCalls [2]struct {
		once sync.Once
		call *nodescript.Call
	}

	// per node: closed once the acquisition call on that node has returned;
	// acqOutcome[i] is valid after that.
	acqDone    []chan struct{}
	acqOutcome []round.Outcome
	acqSent    []bool // false: the node was hung, and nothing was sent
	// per node: closed once the first release after a failed attempt was
	// tried. Made by abandon, before the verdict that the rollbacks wait for.
	rollbackTried []chan struct{}
	rollbacks     *release   // the rollbacks in flight, for this client's next attempt (settle.go)
	ownInFlight   bool       // this client had a release of the name in flight when the attempt began
	ownReleases   []*release // those releases: the call on each node goes after theirs (afterOwn)
	// per node, if a release of the name was in flight or retried when the
	// attempt began (else nil): one was retried there when its call went
	// out (sending, ownRefusalsDecided)
	ownRetried []atomic.Bool
	// closed when the attempt is decided; success is set before.
	verdict chan struct{}
	success bool
	// per node: counts its call's return and the verdict; the second
	// settles the node (settleNode)
	toSettle []atomic.Int32
	// nodes that refused only because the free lock was promised to
	// another waiter (see LostToPromises)
	promisedElsewhere atomic.Int32
	// lostFirst: round 1 was lost before ctx ended (RoundOne); the
	// caller's goroutine writes and reads it
	lostFirst bool

	// one Extend at a time (see Extend): holds a token while one runs
	extending chan struct{}
	unheard   unheardCalls // the extension calls that may still land (unheard.go)
	// signalled when an Extend changed the TTL, or pulled the validity
	// back: Do's keep-alive re-arms
	ttlMoved chan struct{}

	mu       sync.Mutex
	ttl      time.Duration // the TTL last applied: the term's, or the last successful Extend's
	until    time.Time
	timer    Timer
	released bool
	done     chan struct{}
	doneOnce sync.Once

	unlockOnce sync.Once
	unlockErr  error // Release's result: nil, a *verdict.Failure, or ErrClosed
}

func (e *Engine) initLease(l *Lease, r Request) {
	n := len(e.Nodes)
	value := nodescript.NewValue()
	l.e = e
	l.name = r.Name
	if l.names = r.Names; l.names == nil {
		l.name1[0] = r.Name
		l.names = l.name1[:]
	}
	l.term = r.Term
	l.ttl = r.Term.TTL
	l.acqDone = make([]chan struct{}, n)
	l.acqOutcome = make([]round.Outcome, n)
	l.acqSent = make([]bool, n)
	l.toSettle = make([]atomic.Int32, n)
	l.verdict = make(chan struct{})
	l.done = make(chan struct{})
	l.extending = make(chan struct{}, 1)
	l.ttlMoved = make(chan struct{}, 1)
	for i := range n {
		l.acqDone[i] = make(chan struct{})
	}
	l.value = value
	l.shape = r.Shape(l, r.Prefix, r.Name, value)
}

// Name is the lease's name.
func (l *Lease) Name() string { return l.name }

// Names are the lock names whose keys the lease holds: its name, or a
// multi-lock's members (Request.Names).
func (l *Lease) Names() []string { return slices.Clone(l.names) }

// Value is the lease's random value on the nodes.
func (l *Lease) Value() string { return l.value }

// Shape is what the primitive put on each node for this lease.
func (l *Lease) Shape() Shape { return l.shape }

// Results are what each node answered to the acquisition: the caller must
// not change them.
func (l *Lease) Results() []round.NodeResult { return l.results }

// Token is the lease's fencing token; 0 without fencing.
func (l *Lease) Token() uint64 { return l.token }

// Until is the end of the lease's validity, on the engine's clock.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Done is closed a margin before Until (StopMargin), or at Release.
func (l *Lease) Done() <-chan struct{} { return l.done }

// doneIn is how long from now Done closes for a validity ending at until,
// under a TTL of ttl.
func (l *Lease) doneIn(until time.Time, ttl time.Duration) time.Duration {
	return until.Sub(l.e.Clock.Now()) - StopMargin(ttl)
}

// StopMargin is how long before Until the Done of a lease under ttl
// closes: 2% of the TTL, at least 20 ms, and at most a tenth of the TTL.
func StopMargin(ttl time.Duration) time.Duration {
	return min(max(ttl/50, 20*time.Millisecond), ttl/10)
}

// TTL is the TTL last applied to l.
func (l *Lease) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Remaining is the validity left, on the engine's clock.
func (l *Lease) Remaining() time.Duration {
	return l.Until().Sub(l.e.Clock.Now())
}

// Released tells whether Release has begun on l.
func (l *Lease) Released() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

func (l *Lease) closeDone() { l.doneOnce.Do(func() { close(l.done) }) }
