package lease

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/identity"
	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// Request is one acquisition attempt's parameters.
type Request struct {
	Name string
	// Waiter identifies a waiting Lock call in the lock's queue, and
	// Waited is how long it has waited so far (the queue prelude); a
	// TryLock passes "".
	Waiter string
	Waited time.Duration
	Term   Term
	// List is the node list check whose votes count (identity.View): Attempt
	// fills it in.
	List *identity.View
	// Prefix is the client's key prefix, and Shape makes what the
	// primitive puts on each node for lease l and its random value (Mutex).
	Prefix string
	Shape  func(l *Lease, prefix, name, value string) Shape
	// Names are the lock names whose keys the lease holds, when they are
	// not just Name (a multi-lock's members; a read-write lock's
	// RWSettleName): this client's releases still in flight are kept per
	// name (settle.go), so that a Lock of a member waits for the set's
	// release, and the set for a member's, and a read-write lock's for its
	// own alone.
	Names []string
}

// Attempt is one acquisition attempt of r on l, the zero Lease, which the
// caller allocated: it waits for this client's releases of the name still
// in flight (settle.go), asks the deployment which votes count (its check
// of the node list, which the first attempt waits for), begins the lease
// (Begin) and sends it from start (Acquire). begun is false if it failed
// before it began the lease (nothing was sent); err is then a *verdict.Failure, or
// the deployment's error. r.List is the deployment's, not the caller's.
func (e *Engine) Attempt(ctx context.Context, l *Lease, r Request) (start time.Time, commit []round.NodeResult, begun bool, err error) {
	names := r.Names
	if names == nil {
		names = []string{r.Name}
	}
	if err := e.settling.wait(ctx, e.Rounds.Epoch(), names...); err != nil {
		return time.Time{}, nil, false, &verdict.Failure{Op: "lock", Name: r.Name, Cause: err}
	}
	if r.List, err = e.Deployment.AttemptList(ctx, r.Name); err != nil {
		return time.Time{}, nil, false, err
	}
	if e.Hooks.AttemptStart != nil {
		e.Hooks.AttemptStart(r.Name)
	}
	e.Begin(l, r)
	start = e.Clock.Now()
	commit, err = l.Acquire(ctx, start, r.Waited)
	return start, commit, true, err
}

// Begin makes l the lease of one attempt, not yet sent: Acquire sends it.
// l is the zero Lease, which the caller allocated (within its own handle,
// so that an attempt costs one allocation for both); it must not be
// copied afterwards.
func (e *Engine) Begin(l *Lease, r Request) {
	e.initLease(l, r)
	l.list = r.List
	// A refusal may come from this client's own release or rollback of the
	// name, if one was in flight when the attempt went out (verdict.Failure.Own).
	var retrying bool
	l.ownReleases, retrying = e.settling.inFlight(l.names...)
	l.ownInFlight = len(l.ownReleases) > 0
	if l.ownInFlight || retrying {
		// Where a retry is still under way when the call goes out
		// (sending); one that got through before is not (afterOwn holds
		// the call for the first retry of a release whose try timed out).
		l.ownRetried = make([]atomic.Bool, len(e.Nodes))
	}
	l.waiter = r.Waiter
}

// Acquire makes the attempt that Begin made, started at start: round 1,
// and with fencing the commit. On success l is held and err is nil. On
// failure err is a *verdict.Failure, after l was abandoned (rolled back on every
// node, in the background where a call is still out), or ErrClosed if the
// engine is closed and nothing was sent. commit is round 2's outcome, if
// there was one.
func (l *Lease) Acquire(ctx context.Context, start time.Time, waited time.Duration) (commit []round.NodeResult, err error) {
	t, ctxErr := l.RoundOne(ctx, waited)
	if t == nil {
		return nil, ctxErr // closed
	}
	var why, cause error
	if ctxErr == nil && t.Won() {
		if commit, why, cause = l.Grant(ctx, start, t); why == nil && cause == nil {
			return commit, nil
		}
	}
	return commit, l.Fail(t, ctxErr, commit, why, cause)
}

// RoundOne sends l's acquisition to every node and returns round 1's tally
// once the outcome is decided, with ctx's error if ctx ended first. On a
// closed client it sends nothing and returns a nil tally and ErrClosed.
// waited is how long l's waiter has waited so far.
func (l *Lease) RoundOne(ctx context.Context, waited time.Duration) (*round.Tally, error) {
	e := l.e
	op := l.acquireOp
	if e.Fencing {
		op = l.fencedAcquireOp
	}
	l.acquire = l.shape.Acquire(l, waited.Microseconds())
	// lostFirst: the nodes lost the round before ctx ended; the rest of
	// the wait only explains it, and ctx ending it must not change why
	// (classifyEnded says ErrLocked if any node refused: a majority
	// outage with a stale key on one node said "held elsewhere").
	l.lostFirst = false
	done := func(t *round.Tally) bool {
		if t.Lost() && ctx.Err() == nil {
			l.lostFirst = true
		}
		return decidedAndExplained(t)
	}
	// A lost round waits for its explanation until the node timeout from
	// its start (a grace after the last reply, if that is later), whether
	// or not a majority has replied (4 nodes: 1 down, 1 refusal, 2 paused
	// waited out the 5 s patience). Not just a grace: the grace is measured
	// on the nodes that answered, and a healthy node farther away than they
	// are (15 ms, the grace 5 ms) was counted as down, a held lock beside a
	// down node said ErrUnavailable every time, and a waiting Lock gave up
	// at its outage bound.
	start := time.Now()
	// The same holds before the loss where GiveUpOnContention would give
	// up on the silent nodes after its grace (5 nodes: a grant, a
	// refusal, two down, one far): the round's end is set by the first
	// early time, so the wait must be decided there too. While the nodes
	// that answered explain the loss on their own (a majority refused, or
	// too many failed), nothing changes: a healthy contended round gives
	// up at the grace, as before.
	soon := func(t *round.Tally) (time.Time, bool) {
		end, ok := e.Rounds.GiveUpOnContention(t)
		if t.Lost() {
			end, ok = t.LastReply.Add(e.Rounds.Grace(t)), true
		}
		if ok && silentCouldExplain(t) {
			// Up to the node timeout from the start, a tenth of it after
			// the last reply if later: not the grace after a lost round's
			// last reply, three times the slowest reply, which after a
			// late reply (a node failing or timing out just inside the
			// node timeout) ran to 3-4 node timeouts when fewer than a
			// majority had answered (TestAnOutageLostAtALateReplyEndsAboutANodeTimeoutIn).
			timeout := start.Add(e.NodeTimeout)
			if late := t.LastReply.Add(e.NodeTimeout / 10); late.After(timeout) {
				timeout = late
			}
			if t.Lost() || timeout.After(end) {
				end = timeout
			}
		}
		return end, ok
	}
	return e.Rounds.Run(ctx, round.Spec{Name: "lock", Op: op, Split: (*roundOne)(l), Then: l.afterAcquire}, done, soon)
}

// decidedAndExplained ends round 1 once it is won, or lost and the nodes
// still silent can no longer change why (classifyAcquire): a lost round
// whose refusals, with the silent nodes' grants, would have made a
// majority waits for those nodes (up to the node timeout from the round's
// start, then ErrUnavailable, as for paused nodes: RoundOne's soon).
// Ending at the loss, with one node
// of three down and the lock held on the others, reported ErrUnavailable
// whenever the down node's error came before the second refusal (18 of 20
// TryLocks; a waiting Lock backed off as in an outage and gave up at its
// outage bound while the lock was merely held:
// TestALockHeldBesideADownNodeIsContention). The silent nodes answer
// within a round trip when up; while every node answers, a lost round is
// explained at once (a majority refused).
func decidedAndExplained(t *round.Tally) bool {
	if t.Won() {
		return true
	}
	if !t.Lost() {
		return false
	}
	return classifyAcquire(t) != kind.ErrUnavailable || !silentCouldExplain(t)
}

// silentCouldExplain: the silent nodes' answers could still turn an
// outage (too few grants and refusals) into contention.
func silentCouldExplain(t *round.Tally) bool {
	return !couldBeContention(t, 0) && couldBeContention(t, t.N-t.Replied)
}

// Fail abandons a lost attempt and says why it was lost: ctxErr if ctx
// ended during round 1 (tally t), else classifyAcquire's kind if round 1
// was lost, else the grant's kind and cause. commit is round 2's outcome,
// if there was one; the error reports it in place of round 1's unless the
// grant failed for want of validity.
func (l *Lease) Fail(t *round.Tally, ctxErr error, commit []round.NodeResult, why, cause error) *verdict.Failure {
	qe := &verdict.Failure{Op: "lock", Name: l.name, Cause: ctxErr, Nodes: t.Snapshot(), After: l.acqDone,
		Own: l.ownInFlight || l.e.settling.pending(l.names...)}
	switch {
	case ctxErr != nil:
		// Cut short by ctx: still say why the round was not won, except
		// by refusals that may be this client's own (verdict.Failure.Ended).
		if !t.Won() {
			qe.Kind = classifyEnded(t, ctxErr, l.e.NodeTimeout)
			if l.lostFirst && qe.Kind == kind.ErrLocked && classifyAcquire(t) == kind.ErrUnavailable {
				// Lost for want of answers, and ctx ended the wait for
				// the silent nodes that could have said why: a refusal
				// short of a majority is no holder (a majority outage
				// with a stale key), and a node cut short before its node
				// timeout is no outage (a held lock beside a down node,
				// its third node farther than the ctx). (Where the
				// failed nodes leave too few, classifyEnded has said
				// ErrUnavailable already.)
				qe.Kind = nil
			}
			if qe.Own && qe.Kind == kind.ErrLocked {
				qe.Kind = nil
			}
		}
	case !t.Won():
		qe.Kind = classifyAcquire(t)
		if qe.Kind == kind.ErrLocked && l.ownRefusalsDecided(t) {
			// The refusals that decided it may be this client's own old
			// value, its release not yet through to those nodes: no
			// evidence of another owner, and the nodes not yet usable.
			qe.Kind, qe.Own = kind.ErrUnavailable, true
		}
		qe.LostToPromises = qe.Kind == kind.ErrLocked && l.lostToPromises(t)
		qe.Promised = int(l.promisedElsewhere.Load())
	default:
		qe.Kind, qe.Cause = why, cause
		if commit != nil && why != kind.ErrNoValidity {
			qe.Op, qe.Nodes = "lock (commit)", commit
		}
	}
	l.abandon(t)
	return qe
}

// Grant turns a won round 1 into a held lock: it commits the fencing token
// (round 2) and checks the validity. On failure it returns why, and the
// attempt is abandoned. commit is the outcome of round 2, if there was one.
func (l *Lease) Grant(ctx context.Context, start time.Time, t *round.Tally) (commit []round.NodeResult, why, cause error) {
	e := l.e
	// The keys were set after start, so they last until start + TTL, less
	// the drift. (Counting from the end of the attempt would subtract its
	// duration twice.)
	until := start.Add(e.Validity(l.term.TTL))
	var token int64
	if e.Fencing {
		token = t.Best
		commit, why, cause = l.commit(ctx, token, t, until)
		if why != nil || cause != nil {
			return commit, why, cause
		}
	}
	if until.Sub(e.Clock.Now()) <= 0 {
		return commit, kind.ErrNoValidity, nil
	}
	l.Acquired(uint64(token), t.Snapshot(), until)
	return commit, nil, nil
}

// acquireOp is the acquisition call on one node.
func (l *Lease) acquireOp(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
	if err := l.afterOwn(ctx, i); err != nil {
		return round.NodeFailed, 0, err
	}
	l.sending(i)
	return l.parseAcquire(i, l.acquire.Run(ctx, node))
}

// parseAcquire is node i's outcome of round 1, unfenced.
func (l *Lease) parseAcquire(i int, cmd *redis.Cmd) (round.Outcome, int64, error) {
	n, err := cmd.Int64()
	switch {
	case err == nil && !l.admit(i, 0):
		l.e.Deployment.Recheck()
		return round.NodeFailed, 0, errNotChecked
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return round.NodeFailed, 0, kind.WrongType(err)
	case kind.IsPermits(err):
		return round.NodeFailed, 0, kind.Permits(err)
	case err != nil:
		return round.NodeFailed, 0, err
	case n == 1:
		return round.NodeGranted, 0, nil
	case n == refusedPromised:
		l.promisedElsewhere.Add(1)
	}
	return round.NodeRefused, 0, nil
}

// roundOne is round 1 split for a batch (round.Split).
type roundOne Lease

func (r *roundOne) Command(i int) []any {
	l := (*Lease)(r)
	if !l.ownEnded(i) {
		return nil
	}
	l.sending(i)
	return l.acquire.Command()
}

func (r *roundOne) Parse(i int, cmd *redis.Cmd) (round.Outcome, int64, error) {
	l := (*Lease)(r)
	if l.e.Fencing {
		return l.parseFencedAcquire(i, cmd)
	}
	return l.parseAcquire(i, cmd)
}

// refusedPromised is the acquisition scripts' status for a node where the
// lock is free but promised to another waiter.
const refusedPromised = 2

// ownRefusalsDecided reports whether attempt l was lost to refusals that
// may be this client's own old value: nodes where a release or rollback
// of the name failed and was being retried in the background (settling)
// when the attempt's call went out. The retry may have got through since,
// while the round waited for a slow node; the call may still have landed
// before it. Without those nodes, the nodes that granted and refused would
// not have made a majority.
func (l *Lease) ownRefusalsDecided(t *round.Tally) bool {
	own := 0
	for i, r := range t.Results {
		if r.Outcome == round.NodeRefused && (l.ownRetried != nil && l.ownRetried[i].Load() || l.e.settling.retryingAt(i, l.names...)) {
			own++
		}
	}
	return own > 0 && t.Granted()+t.Counts[round.NodeRefused]-own < t.Majority
}
