package redlock

import (
	"context"
	_ "embed"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// TryLock makes one attempt to acquire the lock called name. It sends the
// acquisition to every node at once and returns as soon as the outcome is
// decided: a majority granted, or a majority can no longer grant.
//
// On success the lock is valid until Until. On failure it returns a
// *QuorumError whose Kind is ErrLocked, ErrUnavailable, ErrNoValidity,
// ErrSuperseded, ErrNotProvisioned, or one that no retry fixes (ErrWrongType,
// ErrAuth, ErrNoPermission, ErrScript), after releasing the lock on every node that answered; nodes
// that had not answered are released in the background as soon as their
// call ends.
//
// It waits for a majority's answers up to the round's patience (see
// WithNodeTimeout: 5 s with the defaults, when a majority is down or
// paused), or until ctx ends if that comes first. Then too the error is a
// *QuorumError with a Kind (ErrUnavailable when too few nodes had
// answered) and every node's outcome, those still silent NodeTimedOut
// with an Err that wraps ctx's error; ctx's error is its Cause, so
// errors.Is matches it as well. (A refusal that may be this client's own
// release still in flight gives no Kind then: see Lock.)
//
// name must be non-empty, at most MaxNameLength bytes long, and must not
// begin with '}' (see ErrBadName); otherwise TryLock sends nothing and
// returns ErrEmptyName, ErrNameTooLong or ErrBadName, wrapped, not a
// *QuorumError. Lock and Do check names the same way.
func (c *Client) TryLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	ls, err := c.leaseOf(c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if err := c.beforeTry(ctx, name); err != nil {
		return nil, err
	}
	return c.tryLock(ctx, name, "", 0, ls)
}

// beforeTry is what TryLock does before its attempt: it refuses a bad name
// or an ended ctx, and learns the fenced client's node identities.
func (c *Client) beforeTry(ctx context.Context, name string) error {
	if err := validateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &QuorumError{Op: "lock", Name: name, Cause: err}
	}
	return nil
}

// tryLock makes one attempt. waiter identifies a waiting Lock call in the
// lock's queue, and waited is how long it has waited so far (queueLua);
// TryLock passes "".
//
// Votes count only from nodes that showed the deployment's identity at
// the check of the node list (nodelist.go), which the first attempt waits
// for.
func (c *Client) tryLock(ctx context.Context, name, waiter string, waited time.Duration, ls lease) (_ *Lock, err error) {
	if err := c.settling.wait(ctx, name, c.rounds.Epoch()); err != nil {
		return nil, &QuorumError{Op: "lock", Name: name, Cause: err}
	}
	list, err := c.attemptList(ctx, name)
	if err != nil {
		return nil, err
	}
	if tr := c.cfg.trace; tr != nil && tr.AttemptStart != nil {
		tr.AttemptStart(name)
	}
	l := c.newLock(name, ls)
	l.list = list
	// A refusal may come from this client's own release or rollback of the
	// name, if one was in flight when the attempt went out (QuorumError.ended).
	l.ownReleases = c.settling.inFlight(name)
	l.ownInFlight = len(l.ownReleases) > 0
	l.waiter = waiter
	start := c.cfg.clock.Now()
	var commit []NodeResult
	defer func() {
		// One report per attempt, however it ended.
		if c.cfg.observer == nil || err == nil && l.until.IsZero() {
			return // no observer, or a panic (of a Trace callback, say): no attempt ended
		}
		if err != nil {
			c.observe(ctx, "lock", name, start, l.results, commit, 0, time.Time{}, err)
		} else {
			c.observe(ctx, "lock", name, start, l.results, commit, l.token, l.until, nil)
		}
	}()
	t, ctxErr := l.roundOne(ctx, waited)
	if t == nil {
		return nil, ctxErr // closed
	}
	var kind, cause error
	if ctxErr == nil && t.Won() {
		if commit, kind, cause = l.grant(ctx, start, t); kind == nil && cause == nil {
			return l, nil
		}
	}
	return nil, l.fail(t, ctxErr, commit, kind, cause)
}

// roundOne sends l's acquisition to every node and returns round 1's tally
// once the outcome is decided, with ctx's error if ctx ended first. On a
// closed client it sends nothing and returns a nil tally and ErrClosed.
// waited is how long l's waiter has waited so far.
func (l *Lock) roundOne(ctx context.Context, waited time.Duration) (*round.Tally, error) {
	c := l.c
	waitedUs := waited.Microseconds()
	op := l.acquireOp
	if c.cfg.fencing {
		op = l.fencedAcquireOp
		l.acquire = c.fencedAcquireCall(l, l.waiter, waitedUs)
	} else if l.waiter == "" {
		// TryLock never queues, so the script touches neither the queue nor
		// its arguments: left out, the call costs the node about 7% less.
		l.acquire = nodescript.NewCall(nodescript.Acquire, l.keyArgs[:3], l.valueArg, l.lease.arg, "")
	} else {
		l.acquire = nodescript.NewCall(nodescript.Acquire, l.keyArgs, l.valueArg, l.lease.arg, l.waiter, c.args.staleWaiter, waitedUs)
	}
	return c.rounds.Run(ctx, round.Spec{Name: "lock", Op: op, Then: l.afterAcquire},
		(*round.Tally).Decided, c.rounds.GiveUpOnContention)
}

// fail abandons a lost attempt and says why it was lost: ctxErr if ctx
// ended during round 1 (tally t), else classifyAcquire's kind if round 1
// was lost, else the grant's kind and cause. commit is round 2's outcome,
// if there was one; the error reports it in place of round 1's unless the
// grant failed for want of validity.
func (l *Lock) fail(t *round.Tally, ctxErr error, commit []NodeResult, kind, cause error) *QuorumError {
	qe := &QuorumError{Op: "lock", Name: l.name, Cause: ctxErr, Nodes: t.Snapshot(), after: l.acqDone,
		own: l.ownInFlight || l.c.settling.pending(l.name)}
	switch {
	case ctxErr != nil:
		// Cut short by ctx: still say why the round was not won, except
		// by refusals that may be this client's own (QuorumError.ended).
		if !t.Won() {
			qe.Kind = classifyAcquire(t)
			if qe.own && qe.Kind == ErrLocked {
				qe.Kind = nil
			}
		}
	case !t.Won():
		qe.Kind = classifyAcquire(t)
		qe.lostToPromises = qe.Kind == ErrLocked && l.lostToPromises(t)
	default:
		qe.Kind, qe.Cause = kind, cause
		if commit != nil && kind != ErrNoValidity {
			qe.Op, qe.Nodes = "lock (commit)", commit
		}
	}
	l.abandon(t)
	return qe
}

// grant turns a won round 1 into a held lock: it commits the fencing token
// (round 2) and checks the validity. On failure it returns why, and the
// attempt is abandoned. commit is the outcome of round 2, if there was one.
func (l *Lock) grant(ctx context.Context, start time.Time, t *round.Tally) (commit []NodeResult, kind, cause error) {
	c := l.c
	// The keys were set after start, so they last until start + TTL, less
	// the drift. (Counting from the end of the attempt would subtract its
	// duration twice.)
	until := start.Add(c.cfg.validity(l.lease.ttl))
	var token int64
	if c.cfg.fencing {
		token = t.Best
		commit, kind, cause = l.commit(ctx, token)
		if kind != nil || cause != nil {
			return commit, kind, cause
		}
	}
	if until.Sub(c.cfg.clock.Now()) <= 0 {
		return commit, ErrNoValidity, nil
	}
	l.token = uint64(token)
	l.acquired(t.Snapshot(), until)
	return commit, nil, nil
}

// acquireOp is the acquisition call on one node.
func (l *Lock) acquireOp(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
	if err := l.afterOwn(ctx, i); err != nil {
		return NodeFailed, 0, err
	}
	n, err := l.acquire.Run(ctx, node).Int64()
	switch {
	case err == nil && !l.list.admit(l, i, 0):
		l.c.checkList(false)
		return NodeFailed, 0, errNotChecked
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return NodeFailed, 0, kind.WrongType(err)
	case err != nil:
		return NodeFailed, 0, err
	case n == 1:
		return NodeGranted, 0, nil
	case n == refusedPromised:
		l.promisedElsewhere.Add(1)
	}
	return NodeRefused, 0, nil
}

// refusedPromised is the acquisition scripts' status for a node where the
// lock is free but promised to another waiter.
const refusedPromised = 2

// afterAcquire runs on the node's goroutine once its acquisition call has
// returned. If the attempt as a whole failed, it rolls the node back, after
// the call and never before it.
func (l *Lock) afterAcquire(r round.Reply) {
	l.acqOutcome[r.Node] = r.Outcome
	l.acqSent[r.Node] = r.Sent
	close(l.acqDone[r.Node])
	<-l.verdict
	if l.success {
		return // held
	}
	ended := func() { l.c.settling.callEnded(l.name, l.rollbacks, r.Node) }
	if !l.acqSent[r.Node] {
		ended()
		return // nothing was sent there
	}
	l.c.releaseNode(l.c.nodes[r.Node], l, definite(r.Outcome), l.rollbackTried[r.Node], ended)
}

// definite reports whether a call's outcome proves that the node processed
// it, so no copy of it can still be in flight.
func definite(o Outcome) bool { return o == NodeGranted || o == NodeRefused }

// acquired turns a won attempt into a held lock.
func (l *Lock) acquired(results []NodeResult, until time.Time) {
	l.results = results
	l.until = until
	l.timer = l.c.cfg.clock.AfterFunc(l.doneIn(until, l.lease.ttl), l.closeDone)
	l.success = true
	close(l.verdict)
}

// abandon settles a lost attempt: every node is rolled back after its call
// returns. It waits, for at most one node timeout, for the first rollback
// try on the nodes that granted, so a caller that retries does not trip over
// its own value; everything else is rolled back in the background.
func (l *Lock) abandon(t *round.Tally) {
	l.results = t.Snapshot()
	l.closeDone()
	l.rollbackTried = make([]chan struct{}, len(l.c.nodes))
	for i := range l.rollbackTried {
		l.rollbackTried[i] = make(chan struct{})
	}
	// This client's next attempt on the name waits for the rollbacks, as
	// for an Unlock's releases (settle.go), for a node timeout at most.
	l.rollbacks = l.c.settling.start(l.name, len(l.c.nodes))
	l.rollbacks.until.Store(int64(time.Since(l.c.rounds.Epoch()) + l.c.cfg.nodeTimeout))
	close(l.verdict)
	wait := time.NewTimer(l.c.cfg.nodeTimeout)
	defer wait.Stop()
	for i, r := range l.results {
		if !t.Heard[i] || r.Outcome != NodeGranted {
			continue
		}
		select {
		case <-l.rollbackTried[i]:
		case <-wait.C:
			return
		}
	}
}
