package redlock

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Client acquires locks on a fixed set of independent Redis masters. It is
// safe for concurrent use. The go-redis clients stay the caller's: Close
// does not close them.
type Client struct {
	nodes []redis.UniversalClient
	cfg   config
	log   *slog.Logger

	mu      sync.Mutex
	closed  bool
	closing chan struct{}  // closed by Close: background retries stop
	bg      sync.WaitGroup // every goroutine the client starts for node calls
	// stopped is closed once Close has run and every goroutine of the
	// client has ended (bg and the notifier's).
	stopped   chan struct{}
	closeOnce sync.Once

	life      context.Context // ends at Close: background work stops
	endLife   context.CancelFunc
	amnesiac  []atomic.Bool // per node: the amnesia warning was given
	repairing []atomic.Bool // per node: an online repair runs (repair.go)
	health    []nodeHealth  // per node: is it hung (quorum.go)
	dials     []*dialRecord // per node: its last failed dial (causes.go), or nil
	epoch     time.Time     // the origin of since()
	keys      nodeKeys      // the per-node fencing keys
	learned   sync.Once     // learnIdentities has run
	knownMu   sync.Mutex
	known     []string // per node: the uuid this client saw it hold (repair.go)

	notify notifier // release notifications for waiters in Lock
	// id names the client in its waiters' ids ("<id>/<n>") and in the
	// channel on which it hears of the locks promised to them.
	id      string
	waiters atomic.Uint64

	args scriptArgs

	lockWarns warnLimiter // Lock's warnings about failing attempts (lockwarn.go)

	testHookBeforeCommit    func() // tests only: runs between round 1 and round 2
	testHookBeforeSubscribe func() // tests only: runs before each SUBSCRIBE a node's subscriber sends
}

// scriptArgs are the script arguments that depend only on the
// configuration, boxed once (see scriptCall).
type scriptArgs struct {
	ttl, markerTTL, staleWaiter, promiseFor, retention any
}

// New returns a client over nodes, which must be independent masters (not
// replicas of each other). Any go-redis client works: a plain client, a
// failover (Sentinel) client, or, without fencing, a cluster client standing
// for one node. With fencing, a failover is caught: the promoted replica
// serves under a new replication id and takes part in no quorum until it
// is repaired (docs/fencing.md); without fencing, a failover can lose locks
// it held, as any node that loses its data can.
//
// With fencing on, the deployment must be provisioned once (Provision)
// before locks can be taken.
//
// A lock needs a majority, N/2+1 nodes. An even N works, but tolerates no
// more failures than N-1 nodes would: six nodes, like five, survive two.
//
// A nil node, including a nil pointer such as a (*redis.Client)(nil), is
// refused with ErrNilNode.
//
// New adds a hook (AddHook) to each node's go-redis client, once per
// client however many lock clients use it, that records why its dials fail,
// so that a node refusing connections is reported as such (NodeFailed with
// the dial error) rather than as timed out. The hook only observes dials,
// holds no lock client, and stays on the go-redis client.
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, ErrNoNodes
	}
	seen := make(map[redis.UniversalClient]int, len(nodes))
	for i, n := range nodes {
		if isNil(n) {
			return nil, fmt.Errorf("%w: nodes[%d] is %T(nil)", ErrNilNode, i, n)
		}
		if j, dup := seen[n]; dup {
			return nil, fmt.Errorf("%w: nodes[%d] and nodes[%d]", ErrDuplicateNode, j, i)
		}
		seen[n] = i
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.fencing {
		if len(nodes) > MaxFencingNodes {
			return nil, fmt.Errorf("%w: got %d", ErrTooManyNodes, len(nodes))
		}
		for i, n := range nodes {
			switch n.(type) {
			case *redis.ClusterClient, *redis.Ring:
				return nil, fmt.Errorf("%w: nodes[%d] is a %T", ErrFencingNode, i, n)
			}
		}
	}
	log := cfg.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		nodes:     append([]redis.UniversalClient(nil), nodes...),
		cfg:       cfg,
		log:       log,
		closing:   make(chan struct{}),
		amnesiac:  make([]atomic.Bool, len(nodes)),
		repairing: make([]atomic.Bool, len(nodes)),
		health:    make([]nodeHealth, len(nodes)),
		epoch:     time.Now(),
		keys:      newNodeKeys(cfg.keyPrefix),
		known:     make([]string, len(nodes)),
		id:        uuid.NewString(),
	}
	c.dials = make([]*dialRecord, len(nodes))
	for i, n := range c.nodes {
		c.dials[i] = watchDials(n)
	}
	c.life, c.endLife = context.WithCancel(context.Background())
	c.notify.c = c
	c.args = scriptArgs{
		ttl:         cfg.ttl.Milliseconds(),
		markerTTL:   c.markerTTL().Milliseconds(),
		staleWaiter: c.staleWaiter(),
		promiseFor:  c.promiseFor(),
		retention:   cfg.retention.Milliseconds(),
	}
	return c, nil
}

// Close stops the client's background work and waits for it to end, for
// at most four node timeouts (half a second if that is longer). It always
// returns nil.
//
// Calls in flight end as soon as their nodes answer. What is still running
// when the wait ends is abandoned, not cut short: calls stuck on a node
// that does not answer (a paused process, with go-redis clients that have no
// read timeout and ignore deadlines) and the closing of the subscriber
// connection to it. Their goroutines end when the node answers or the
// connection breaks (closing the go-redis client breaks an established one),
// and a rollback they were to run is still run then. Releases still being
// retried against unreachable nodes stop at once, and those keys expire by
// their TTL. Close does not unlock held locks: Unlock them first. Calling
// Close again waits again, as long, for what the first call abandoned.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		close(c.closing)
		c.endLife()
		c.mu.Unlock()
		c.notify.close()
		c.stopped = make(chan struct{})
		go func() {
			c.bg.Wait()
			c.notify.wg.Wait()
			close(c.stopped)
		}()
	})
	t := time.NewTimer(c.closeWait())
	defer t.Stop()
	select {
	case <-c.stopped:
	case <-t.C:
		c.log.Warn("redlock: Close abandoned calls to nodes that do not answer; they end when the nodes answer",
			"waited", c.closeWait())
	}
	return nil
}

// closeWait bounds how long Close waits. An attempt in flight is decided
// within a node timeout, and its rollbacks are one more call per node: on
// nodes that answer within the node timeout, all of it ends well within
// four. The floor keeps a tiny node timeout from abandoning calls to a
// loaded but healthy node.
func (c *Client) closeWait() time.Duration {
	return max(4*c.cfg.nodeTimeout, 500*time.Millisecond)
}

// TryLock makes one attempt to acquire the lock called name. It sends the
// acquisition to every node at once and returns as soon as the outcome is
// decided: a majority granted, or a majority can no longer grant.
//
// On success the lock is valid until Until. On failure it returns a
// *QuorumError whose Kind is ErrLocked, ErrUnavailable, ErrNoValidity,
// ErrSuperseded, ErrNotProvisioned, or one that no retry fixes (ErrWrongType,
// ErrAuth, ErrNoPermission, ErrScript), after releasing the lock on every node that answered; nodes
// that had not answered are released in the background as soon as their
// call ends. If ctx ends first, the error also matches ctx's error.
//
// name must be non-empty, at most MaxNameLength bytes long, and must not
// begin with '}' (see ErrBadName); otherwise TryLock sends nothing and
// returns ErrEmptyName, ErrNameTooLong or ErrBadName, wrapped, not a
// *QuorumError. Lock and Do check names the same way.
func (c *Client) TryLock(ctx context.Context, name string) (*Lock, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &QuorumError{Op: "lock", Name: name, Cause: err}
	}
	return c.tryLock(ctx, name, "", 0)
}

// tryLock makes one attempt. waiter identifies a waiting Lock call in the
// lock's queue, and waited is how long it has waited so far (queueLua);
// TryLock passes "".
func (c *Client) tryLock(ctx context.Context, name, waiter string, waited time.Duration) (*Lock, error) {
	l := c.newLock(name)
	l.waiter = waiter
	waitedMs := waited.Milliseconds()
	start := c.cfg.clock.Now()
	deadline := time.Now().Add(c.cfg.nodeTimeout)
	op := l.acquireOp
	if c.cfg.fencing {
		op = l.fencedAcquireOp
		l.acquire = c.fencedAcquireCall(l, waiter, waitedMs)
		c.learnIdentities()
	} else {
		l.acquire = newScriptCall(acquireLua, l.keyArgs, l.valueArg, c.args.ttl, waiter, c.args.staleWaiter, waitedMs)
	}
	replies, err := c.fanOut(ctx, nil, nil, op, l.afterAcquire)
	if err != nil {
		c.observe(ctx, "lock", name, start, nil, nil, 0, time.Time{}, err)
		return nil, err
	}
	t := newTally(len(c.nodes))
	ctxErr := c.collect(ctx, replies, t, (*tally).decided, deadline, c.giveUpOnContention)

	qe := &QuorumError{Op: "lock", Name: name, Cause: ctxErr, Nodes: t.snapshot()}
	var commit []NodeResult
	if ctxErr == nil && t.won() {
		commit, qe.Kind, qe.Cause = l.grant(ctx, start, t)
		if qe.Kind == nil && qe.Cause == nil {
			c.observe(ctx, "lock", name, start, l.results, commit, l.token, l.until, nil)
			return l, nil
		}
		if commit != nil && qe.Kind != ErrNoValidity {
			qe.Op, qe.Nodes = "lock (commit)", commit
		}
	} else if ctxErr == nil {
		qe.Kind = classifyAcquire(t)
	}
	l.abandon(t)
	if c.cfg.observer != nil {
		c.observe(ctx, "lock", name, start, l.results, commit, 0, time.Time{}, qe)
	}
	return nil, qe
}

// grant turns a won round 1 into a held lock: it commits the fencing token
// (round 2) and checks the validity. On failure it returns why, and the
// attempt is abandoned. commit is the outcome of round 2, if there was one.
func (l *Lock) grant(ctx context.Context, start time.Time, t *tally) (commit []NodeResult, kind, cause error) {
	c := l.c
	// The keys were set after start, so they last until start + TTL, less
	// the drift. (Counting from the end of the attempt would subtract its
	// duration twice.)
	until := start.Add(c.cfg.ttl - c.cfg.drift())
	validity := func() time.Duration { return until.Sub(c.cfg.clock.Now()) }
	var token int64
	if c.cfg.fencing {
		token = t.best
		if c.cfg.naive == naiveEarlyValidity && validity() <= 0 {
			return nil, ErrNoValidity, nil
		}
		if c.cfg.naive != naiveNoCommit {
			commit, kind, cause = l.commit(ctx, token)
			if kind != nil || cause != nil {
				return commit, kind, cause
			}
		}
	}
	v := validity()
	if c.cfg.naive == naiveEarlyValidity {
		v = max(v, time.Millisecond) // checked before round 2 only
	}
	if v <= 0 {
		return commit, ErrNoValidity, nil
	}
	l.token = uint64(token)
	l.acquired(t.snapshot(), until)
	return commit, nil, nil
}

// classifyAcquire tells contention from unavailability once an attempt is lost.
func classifyAcquire(t *tally) error {
	blank := 0
	for _, r := range t.results {
		if errors.Is(r.Err, ErrWrongType) {
			return ErrWrongType
		}
		if r.Err == errNoIdentity {
			blank++
		}
	}
	if blank >= t.majority {
		// Never provisioned, or a majority lost its data: no retry helps.
		return ErrNotProvisioned
	}
	if kind := blockingKind(t); kind != nil {
		return kind
	}
	if t.granted()+t.counts[NodeRefused] >= t.majority {
		return ErrLocked
	}
	return ErrUnavailable
}

// Lock acquires the lock called name, retrying until it succeeds or ctx
// ends. It gives up at once on errors that retrying cannot fix
// (ErrWrongType, ErrNotProvisioned, ErrAuth, ErrNoPermission, ErrScript,
// ErrClosed, and the name errors of TryLock, found before any attempt).
// When ctx ends, the error is the last attempt's *QuorumError with ctx's
// error as its Cause. While attempts fail for other reasons than
// contention (nodes down or full, too few answering), it logs a warning
// with each node's cause through the client's logger (WithLogger), at most
// one per lock name every 5 seconds; a successful attempt logs nothing.
// Its pauses between such attempts double each time, up to a second, so
// that waiters do not keep an overloaded node or machine overloaded.
//
// A waiting Lock joins the lock's queue on the nodes, and Unlock promises
// the lock to the longest-waiting live waiter for a moment (two node
// timeouts), so contended locks pass in arrival order rather than to
// whoever's attempt lands first. The promised waiter is woken by a release
// notification (Redis pub/sub, one connection per node shared by the
// client's waiters); the others sleep on. A waiter that misses its
// notification retries after a random delay within the configured bounds,
// and a promise nobody takes expires. TryLock does not queue, and is
// refused while the lock is promised to a waiter.
func (c *Client) Lock(ctx context.Context, name string) (_ *Lock, err error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	started := c.cfg.clock.Now()
	key := c.lockKey(name)
	waiter := c.id + "/" + strconv.FormatUint(c.waiters.Add(1), 10)
	queued := false // an attempt reached the nodes, which put this waiter in the queue
	defer func() {
		if err != nil && queued {
			c.leaveQueue(key, waiter)
		}
	}()
	var wake <-chan wakeReason
	if c.notify.subscribed(key) {
		// Listen before the first attempt, so that a release right after it
		// cannot go unheard and no second look is needed.
		var done func()
		wake, done, _ = c.notify.wait(key, waiter)
		defer done()
	}
	woken, backoff := false, 0 // after a wake-up: retry with short, growing delays
	outages := 0               // attempts in a row lost for want of answers, not to a holder
	for attempts := 1; ; attempts++ {
		if err := ctx.Err(); err != nil {
			return nil, &QuorumError{Op: "lock", Name: name, Cause: err}
		}
		l, err := c.tryLock(ctx, name, waiter, c.cfg.clock.Now().Sub(started))
		queued = true
		var qe *QuorumError
		if err == nil || !errors.As(err, &qe) || qe.Cause != nil || final(qe.Kind) {
			return l, err
		}
		c.warnRetrying(qe, attempts, started)
		delay := c.retryDelay()
		if qe.Kind == ErrLocked {
			outages = 0
		} else {
			// Nodes down, full or overloaded: back off, so that waiters
			// do not keep a saturated node or machine saturated.
			outages++
			delay = outageDelay(delay, outages)
		}
		if !woken && splitVote(qe.Nodes) {
			// Nobody holds the lock on a majority, but others tried at the
			// same moment: retry soon, as after a wake-up.
			woken, backoff = true, 1
		}
		if woken {
			// Woken waiters of several clients can split the votes so that
			// nobody wins, and then no Unlock will wake anyone: retry after
			// short random delays that double each time, until they reach
			// the configured retry delay.
			if short := handoffSpread << backoff; short < delay {
				delay = rand.N(short)
				backoff++
			} else {
				woken = false
			}
		}
		if wake == nil {
			var done func()
			var listening bool
			wake, done, listening = c.notify.wait(key, waiter)
			defer done()
			if listening {
				// Another waiter's subscription, confirmed before this one
				// registered: a release since the attempt went unheard. Look
				// again soon, at a random moment so that waiters that
				// collided part. (Otherwise wakeListening will come.)
				delay = rand.N(max(c.cfg.nodeTimeout/10, time.Millisecond))
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			qe.Cause = ctx.Err()
			return nil, qe
		case <-t.C:
		case reason := <-wake:
			t.Stop()
			switch reason {
			case wakeListening:
				continue // one look; later releases will reach us
			case wakePromised:
				woken, backoff = true, 1
				continue // the lock is ours to take: at once
			}
			// Nobody was promised the lock: everyone may try. Those that
			// have waited longer try first.
			woken, backoff = true, 1
			if !sleepCtx(ctx, wakeDelay(c.cfg.clock.Now().Sub(started))) {
				qe.Cause = ctx.Err()
				return nil, qe
			}
		}
	}
}

// splitVote reports an attempt lost although some nodes granted it while
// others refused it: the lock was free, and attempts of other waiters split
// the votes. An attempt lost to nodes that did not answer is not one: the
// nodes or the machine are overloaded, and retrying at once would only add
// to the load, so it waits the configured retry delay.
func splitVote(nodes []NodeResult) bool {
	granted, refused := false, false
	for _, n := range nodes {
		granted = granted || n.Outcome == NodeGranted
		refused = refused || n.Outcome == NodeRefused
	}
	return granted && refused
}

// leaveQueue takes a waiter that gave up out of the lock's queue on every
// node, in the background, withdrawing a promise made to it.
func (c *Client) leaveQueue(key, waiter string) {
	keys := []string{key, nextKey(key), queueKey(key), seenKey(key)}
	_, _ = c.fanOut(context.Background(), nil, nil, func(ctx context.Context, _ int, node redis.UniversalClient) (Outcome, int64, error) {
		err := leaveLua.Run(ctx, node, keys, waiter).Err()
		if err != nil {
			return NodeFailed, 0, err
		}
		return NodeGranted, 0, nil
	}, nil)
}

// The keys of a lock's queue (queueLua). They share the lock's hash tag.
func nextKey(key string) string  { return key + ":next" }
func queueKey(key string) string { return key + queueSuffix }
func seenKey(key string) string  { return key + queueSuffix + seenSuffix }

const queueSuffix, seenSuffix = ":queue", ":seen"

// staleWaiter is how long after its last attempt a waiter still counts as
// waiting: the longest a live waiter sleeps, plus an attempt's round trip
// with slack.
func (c *Client) staleWaiter() int64 {
	return (c.cfg.retryDelayMax + 2*c.cfg.nodeTimeout).Milliseconds() + 1
}

// promiseFor is how long a released lock is kept for the first waiter:
// enough for the notification to reach it and its attempt to reach the
// nodes. If it died meanwhile, the lock is free again after this.
func (c *Client) promiseFor() int64 { return (2 * c.cfg.nodeTimeout).Milliseconds() + 1 }

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// outageDelay doubles a retry delay for each attempt in a row that failed
// for another reason than contention, up to maxOutageDelay.
func outageDelay(delay time.Duration, outages int) time.Duration {
	return min(delay<<min(outages-1, 8), max(delay, maxOutageDelay))
}

const maxOutageDelay = time.Second

func (c *Client) retryDelay() time.Duration {
	lo, hi := c.cfg.retryDelayMin, c.cfg.retryDelayMax
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}

// Do acquires the lock called name (waiting as Lock does), runs fn while
// holding it, and releases it when fn returns.
//
// While fn runs, the lock is extended every TTL/3. If the lock cannot be
// kept, the context passed to fn is cancelled with ErrLockLost as its cause
// (context.Cause): fn must stop touching the protected resource then. That
// happens as soon as an extension fails and the validity left would not
// last until the next try, or the lock is definitely gone, and at the
// latest when the validity ends (Until), even while an extension is still
// waiting for the nodes. Do returns fn's error joined with Unlock's, so
// errors.Is(err, ErrExpired) tells the caller the critical section may
// have overlapped another holder. fn's context is cancelled as soon as fn
// returns, before the release, so work fn left running on it stops while
// the lock is still held.
//
// If fn panics (or calls runtime.Goexit), Do stops extending the lock and
// unlocks it before the panic goes on up the stack, unchanged: a caller
// that recovers it does not keep the lock. No goroutine started by Do
// outlives it.
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context, l *Lock) error) error {
	l, err := c.Lock(ctx, name)
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	stop := l.keepAlive(fnCtx, cancel)
	returned := false
	defer func() {
		if !returned {
			// Not recovered, so the panic goes on with its own stack trace.
			cancel(nil)
			stop()
			_ = l.Unlock(context.WithoutCancel(ctx))
		}
	}()

	fnErr := fn(fnCtx, l)
	returned = true
	// fn's context ends with fn, before the release: work fn left running
	// on it must not outlive the lock.
	cancel(nil)
	stop()
	return errors.Join(fnErr, l.Unlock(context.WithoutCancel(ctx)))
}

// keepAlive extends l every TTL/3 until the returned stop is called; stop
// waits for its goroutines to end. It cancels the function's context when
// an extension fails and the remaining validity would not last until the
// next try, or the lock is definitely gone, and when Done closes.
//
// Done is watched by a goroutine of its own: an extension can wait for the
// nodes up to the node timeout, which New allows to be close to TTL/2, and
// the validity can end meanwhile.
func (l *Lock) keepAlive(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	quit := make(chan struct{})
	// Extensions outlive a cancelled fn context (they keep the lock until
	// Unlock), but not stop: nobody needs an extension in flight then.
	extendCtx, endExtend := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-quit:
		case <-l.Done():
			l.mu.Lock()
			released := l.released
			l.mu.Unlock()
			if !released {
				l.c.log.Warn("redlock: lock validity ended while held", "lock", l.name)
			}
			cancel(fmt.Errorf("%w: validity ended", ErrLockLost))
		}
	})
	wg.Go(func() { l.extendEvery(extendCtx, cancel, quit) })
	return func() {
		close(quit)
		endExtend()
		wg.Wait()
	}
}

// extendEvery is keepAlive's extension loop.
func (l *Lock) extendEvery(ctx context.Context, cancel context.CancelCauseFunc, quit <-chan struct{}) {
	interval := l.c.cfg.ttl / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-l.Done():
			return // the watcher cancels
		case <-t.C:
		}
		err := l.Extend(ctx)
		if err == nil {
			t.Reset(interval)
			continue
		}
		if ctx.Err() != nil {
			return // stopped
		}
		if errors.Is(err, ErrExpired) || l.remaining() <= interval {
			l.c.log.Warn("redlock: lock lost: extension failed", "lock", l.name, "err", err)
			cancel(fmt.Errorf("%w: %w", ErrLockLost, err))
			return
		}
		t.Reset(interval) // Extend logged the failure
	}
}

// Lock is a lock held on a majority of the nodes. Its methods are safe for
// concurrent use.
type Lock struct {
	c       *Client
	name    string
	key     string // the lock key, "<prefix>:{<name>}"
	marker  string // the release marker of this value
	value   string // random, unique to this acquisition
	results []NodeResult
	token   uint64
	waiter  string // the Lock call's id in the lock's queue, or ""

	keyArgs  []any       // key, marker and the queue's keys, boxed for the scripts
	valueArg any         // value, boxed
	acquire  *scriptCall // round 1, the same for every node
	// Unlock's release call, built on first use: [sure], see releaseCall.
	unlockCalls [2]struct {
		once sync.Once
		call *scriptCall
	}

	// per node: closed once the acquisition call on that node has returned;
	// acqOutcome[i] is valid after that.
	acqDone    []chan struct{}
	acqOutcome []Outcome
	acqSent    []bool // false: the node was hung, and nothing was sent
	// per node: closed once the first release after a failed attempt was
	// tried. Made by abandon, before the verdict that the rollbacks wait for.
	rollbackTried []chan struct{}
	// closed when the attempt is decided; success is set before.
	verdict chan struct{}
	success bool

	mu       sync.Mutex
	until    time.Time
	timer    timer
	released bool
	done     chan struct{}
	doneOnce sync.Once

	unlockOnce sync.Once
	unlockErr  error
}

func (c *Client) newLock(name string) *Lock {
	n := len(c.nodes)
	// The lock key and its queue's keys (queueKey, seenKey) are prefixes of
	// one another: one string holds all three.
	seen := c.cfg.keyPrefix + ":{" + name + "}" + queueSuffix + seenSuffix
	key := seen[:len(seen)-len(queueSuffix)-len(seenSuffix)]
	queue := seen[:len(key)+len(queueSuffix)]
	value := newValue()
	l := &Lock{
		c:          c,
		name:       name,
		key:        key,
		value:      value,
		acqDone:    make([]chan struct{}, n),
		acqOutcome: make([]Outcome, n),
		acqSent:    make([]bool, n),
		verdict:    make(chan struct{}),
		done:       make(chan struct{}),
	}
	for i := range n {
		l.acqDone[i] = make(chan struct{})
	}
	l.marker = key + ":released:" + value
	l.keyArgs = boxKeys(key, l.marker, nextKey(key), queue, seen)
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

// since is the time since the client was made, in ns, on the monotonic
// clock.
func (c *Client) since() int64 { return int64(time.Since(c.epoch)) }

func (c *Client) lockKey(name string) string { return c.cfg.keyPrefix + ":{" + name + "}" }

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Nodes returns what each node answered to the acquisition.
func (l *Lock) Nodes() []NodeResult { return append([]NodeResult(nil), l.results...) }

// Until returns the end of the lock's validity, on the client's monotonic
// clock: compare it with time.Now(), not with a wall-clock time from
// elsewhere. It is start + TTL - drift, start being read before the
// acquisition's first request was sent. A successful Extend moves it to the
// same bound counted from the start of the Extend call.
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Done returns a channel that is closed when the lock's validity ends
// without a successful Extend, or when the lock is unlocked. Once closed,
// the lock cannot be extended.
func (l *Lock) Done() <-chan struct{} { return l.done }

func (l *Lock) remaining() time.Duration {
	return l.Until().Sub(l.c.cfg.clock.Now())
}

func (l *Lock) closeDone() { l.doneOnce.Do(func() { close(l.done) }) }

// acquireOp is the acquisition call on one node.
func (l *Lock) acquireOp(ctx context.Context, _ int, node redis.UniversalClient) (Outcome, int64, error) {
	o, v, err := l.acquire.outcome(ctx, node)
	if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
		err = fmt.Errorf("%w: %w", ErrWrongType, err)
	}
	return o, v, err
}

// afterAcquire runs on the node's goroutine once its acquisition call has
// returned. If the attempt as a whole failed, it rolls the node back, after
// the call and never before it.
func (l *Lock) afterAcquire(r reply) {
	l.acqOutcome[r.node] = r.outcome
	l.acqSent[r.node] = r.sent
	close(l.acqDone[r.node])
	<-l.verdict
	if l.success || !l.acqSent[r.node] {
		return // held, or nothing was sent there
	}
	l.c.releaseNode(l.c.nodes[r.node], l, definite(r.outcome), l.rollbackTried[r.node])
}

// definite reports whether a call's outcome proves that the node processed
// it, so no copy of it can still be in flight.
func definite(o Outcome) bool { return o == NodeGranted || o == NodeRefused }

// acquired turns a won attempt into a held lock.
func (l *Lock) acquired(results []NodeResult, until time.Time) {
	l.results = results
	l.until = until
	l.timer = l.c.cfg.clock.AfterFunc(until.Sub(l.c.cfg.clock.Now()), l.closeDone)
	l.success = true
	close(l.verdict)
}

// abandon settles a lost attempt: every node is rolled back after its call
// returns. It waits, for at most one node timeout, for the first rollback
// try on the nodes that granted, so a caller that retries does not trip over
// its own value; everything else is rolled back in the background.
func (l *Lock) abandon(t *tally) {
	l.results = t.snapshot()
	l.closeDone()
	l.rollbackTried = make([]chan struct{}, len(l.c.nodes))
	for i := range l.rollbackTried {
		l.rollbackTried[i] = make(chan struct{})
	}
	close(l.verdict)
	wait := time.NewTimer(l.c.cfg.nodeTimeout)
	defer wait.Stop()
	for i, r := range l.results {
		if !t.heard[i] || r.Outcome != NodeGranted {
			continue
		}
		select {
		case <-l.rollbackTried[i]:
		case <-wait.C:
			return
		}
	}
}

// Extend re-applies the TTL on every node that still holds this lock's
// value. It succeeds only if a majority extended it within the validity; the
// new validity then runs from the start of the call. It never re-creates an
// expired key, and it fails with ErrExpired once Done has closed.
func (l *Lock) Extend(ctx context.Context) error {
	start := l.c.cfg.clock.Now()
	until, nodes, err := l.extend(ctx, start)
	if err != nil && !errors.Is(err, ErrReleased) {
		l.c.log.Warn("redlock: extension failed", "lock", l.name, "err", err)
	}
	l.c.observe(ctx, "extend", l.name, start, nodes, nil, l.token, until, err)
	return err
}

// extend returns the new end of the validity, and what each node answered.
func (l *Lock) extend(ctx context.Context, start time.Time) (until time.Time, nodes []NodeResult, err error) {
	qe := &QuorumError{Op: "extend", Name: l.name}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	select {
	case <-l.done:
		qe.Kind = ErrExpired
		if released {
			qe.Kind = ErrReleased
		}
		return time.Time{}, nil, qe
	default:
	}
	c := l.c
	call := newScriptCall(extendLua, l.keyArgs[:1], l.valueArg, c.args.ttl)
	op := func(ctx context.Context, _ int, node redis.UniversalClient) (Outcome, int64, error) {
		return call.outcome(ctx, node)
	}
	deadline := time.Now().Add(c.cfg.nodeTimeout)
	replies, err := c.fanOut(ctx, nil, nil, op, nil)
	if err != nil {
		return time.Time{}, nil, err
	}
	t := newTally(len(c.nodes))
	if qe.Cause = c.collect(ctx, replies, t, (*tally).decided, deadline, nil); qe.Cause == nil && t.won() {
		until = start.Add(c.cfg.ttl - c.cfg.drift()) // as in grant
		if until.After(c.cfg.clock.Now()) && l.moveDeadline(until) {
			if c.cfg.observer != nil {
				nodes = t.snapshot()
			}
			return until, nodes, nil
		}
		qe.Kind = ErrExpired
	}
	if qe.Kind == nil && qe.Cause == nil {
		qe.Cause = c.collect(ctx, replies, t, (*tally).refusedByMajority, deadline, nil)
		qe.Kind = ErrUnavailable
		if t.refusedByMajority() {
			qe.Kind = ErrExpired
		}
	}
	qe.Nodes = t.snapshot()
	return time.Time{}, qe.Nodes, qe
}

// moveDeadline sets a later validity end, unless the lock already ended.
func (l *Lock) moveDeadline(until time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || !l.timer.Stop() {
		return false // the old deadline fired, or is firing: Done is closed
	}
	l.until = until
	l.timer = l.c.cfg.clock.AfterFunc(until.Sub(l.c.cfg.clock.Now()), l.closeDone)
	return true
}

// Unlock deletes the lock on every node where it still holds this lock's
// value, and closes Done. The release is sent even if ctx is already done:
// ctx bounds only how long Unlock waits for the answers. Nodes that cannot
// be reached are retried in the background for up to one TTL.
//
// It returns nil if a majority deleted the lock. It returns a *QuorumError
// with Kind ErrExpired if the lock was no longer held on a majority: the
// critical section may have overlapped another holder. ErrUnavailable means
// too few nodes answered to tell. Later calls return the first call's result.
func (l *Lock) Unlock(ctx context.Context) error {
	l.unlockOnce.Do(func() {
		start := l.c.cfg.clock.Now()
		var nodes []NodeResult
		nodes, l.unlockErr = l.unlock(ctx)
		l.c.observe(ctx, "unlock", l.name, start, nodes, nil, l.token, time.Time{}, l.unlockErr)
	})
	return l.unlockErr
}

// unlock returns what each node answered, and the error Unlock returns.
func (l *Lock) unlock(ctx context.Context) ([]NodeResult, error) {
	l.mu.Lock()
	l.released = true
	l.timer.Stop()
	l.mu.Unlock()
	l.closeDone()

	c := l.c
	op := func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		return l.unlockCall(definite(l.acqOutcome[i])).outcome(ctx, node)
	}
	then := func(r reply) {
		if !r.sent {
			return
		}
		if r.outcome == NodeFailed && !isServerReply(r.err) || r.outcome == NodeTimedOut {
			c.retryRelease(c.nodes[r.node], l, definite(l.acqOutcome[r.node]))
		}
	}
	deadline := time.Now().Add(c.cfg.nodeTimeout)
	replies, err := c.fanOut(context.WithoutCancel(ctx), l.acqDone, l.acqSent, op, then) // nothing to release where nothing was sent
	if err != nil {
		return nil, err
	}
	t := newTally(len(c.nodes))
	cause := c.collect(ctx, replies, t, (*tally).refusedByMajority, deadline, c.waitForStragglers)
	if t.won() {
		if c.cfg.observer != nil {
			return t.snapshot(), nil
		}
		return nil, nil
	}
	qe := &QuorumError{Op: "unlock", Name: l.name, Kind: ErrUnavailable, Cause: cause, Nodes: t.snapshot()}
	if t.refusedByMajority() {
		qe.Kind = ErrExpired
	}
	if qe.Kind == ErrExpired {
		c.log.Warn("redlock: lock had expired before unlock", "lock", l.name, "nodes", summarize(qe.Nodes))
	}
	return qe.Nodes, qe
}

// releaseNode rolls back one node: one try at once, then, while the node
// cannot be reached, retries in the background. tried is closed after the
// first try.
func (c *Client) releaseNode(node redis.UniversalClient, l *Lock, sure bool, tried chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.nodeTimeout)
	outcome, _, err := c.releaseCall(l, sure, false).outcome(ctx, node)
	cancel()
	close(tried)
	if outcome == NodeFailed && !isServerReply(err) {
		c.retryRelease(node, l, sure)
	}
}

// releaseCall is the release script for l. sure says that the node is known
// to have processed the acquisition call; otherwise a copy of it may still be
// in flight, and the script leaves a marker that keeps it from landing.
//
// announce publishes the release to waiters: Unlock does, a rollback not.
func (c *Client) releaseCall(l *Lock, sure, announce bool) *scriptCall {
	var markerTTL any = 0
	if !sure {
		markerTTL = c.args.markerTTL
	}
	flag := 0
	if announce {
		flag = 1
	}
	return newScriptCall(releaseLua, l.keyArgs, l.valueArg, markerTTL, flag, l.waiter, c.args.staleWaiter, c.args.promiseFor)
}

// unlockCall is Unlock's release call, built once for all nodes.
func (l *Lock) unlockCall(sure bool) *scriptCall {
	i := 0
	if sure {
		i = 1
	}
	u := &l.unlockCalls[i]
	u.once.Do(func() { u.call = l.c.releaseCall(l, sure, true) })
	return u.call
}

// markerTTL is how long a release marker keeps a late acquisition call from
// landing: a node paused for longer than this may still apply one.
func (c *Client) markerTTL() time.Duration { return 10 * c.cfg.ttl }

// retryRelease keeps trying to release l on a node that could not be
// reached, with growing pauses, for at most one TTL or until Close.
func (c *Client) retryRelease(node redis.UniversalClient, l *Lock, sure bool) {
	deadline := time.Now().Add(c.cfg.ttl)
	pause := c.cfg.nodeTimeout
	for {
		if time.Now().Add(pause).After(deadline) {
			c.log.Warn("redlock: gave up releasing on an unreachable node; the key expires by its TTL",
				"lock", l.name, "ttl", c.cfg.ttl)
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-c.closing:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.nodeTimeout)
		outcome, _, err := c.releaseCall(l, sure, false).outcome(ctx, node)
		cancel()
		if outcome != NodeFailed || isServerReply(err) {
			return
		}
		pause = min(2*pause, c.cfg.ttl/4)
	}
}
