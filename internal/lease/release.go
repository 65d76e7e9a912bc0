package lease

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// Release deletes the lease on every node where it still holds l's value,
// and closes Done: the root package's Unlock, which documents it. The
// release is sent even if ctx is already done: ctx bounds only how long
// Release waits for the answers. Its result is nil, a *verdict.Failure, or
// ErrClosed if the engine is closed; report, run once the outcome is
// known with the start of the call and what each node answered (nil on
// success without an Observer), may replace it (the root package turns a
// verdict.Failure into its QuorumError and tells the Observer). Later calls, and an
// Extend racing this one, wait for the first call, report included, and
// return its result.
func (l *Lease) Release(ctx context.Context, report func(start time.Time, nodes []round.NodeResult, err error) error) error {
	l.unlockOnce.Do(func() {
		start := l.e.Clock.Now()
		nodes, err := l.release(ctx)
		if report != nil {
			err = report(start, nodes, err)
		}
		l.unlockErr = err
	})
	return l.unlockErr
}

// release is Release's first call.
func (l *Lease) release(ctx context.Context) ([]round.NodeResult, error) {
	l.mu.Lock()
	l.released = true
	l.timer.Stop()
	l.mu.Unlock()
	l.closeDone()

	e := l.e
	op := func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		return Answer(ctx, l.unlockCall(definite(l.acqOutcome[i])), node)
	}
	inFlight := e.settling.start(len(e.Nodes), l.names...)
	// then runs on the goroutine that delivered the reply: it must not
	// block, so a retry goes on a goroutine of its own.
	then := func(r round.Reply) {
		retry := r.Sent && (r.Outcome == round.NodeFailed && !round.IsServerReply(r.Err) || r.Outcome == round.NodeTimedOut)
		if retry {
			// Before the call counts as ended: an attempt ordered after it
			// must know that the old value may still be there.
			e.settling.retryStart(len(e.Nodes), r.Node, l.names...)
		}
		e.settling.callEnded(inFlight, r.Node, l.names...)
		if retry {
			i := r.Node
			e.Rounds.GoHeld(func() { e.retryRelease(i, l, definite(l.acqOutcome[i]), nil) })
		}
	}
	// Decided at the majority: see settle.go for what the rest still do.
	roundStart := time.Now()
	t, cause := e.Rounds.Run(ctx, round.Spec{Name: "unlock", Op: op, Split: (*unlockRound)(l), Then: then, Detach: true,
		After: l.acqDone, Sent: l.acqSent}, // nothing to release where nothing was sent
		(*round.Tally).WonOrRefused, nil)
	if t == nil {
		e.settling.forget(inFlight, l.names...)
		return nil, cause
	}
	if t.Won() {
		inFlight.until.Store(int64(e.settleBy(t, roundStart).Sub(e.Rounds.Epoch())))
	}
	if t.Won() {
		if e.Observed {
			return t.Snapshot(), nil
		}
		return nil, nil
	}
	qe := &verdict.Failure{Op: "unlock", Name: l.name, Kind: kind.ErrUnavailable, Cause: cause, Nodes: t.Snapshot()}
	switch {
	case t.RefusedByMajority():
		qe.Kind = kind.ErrExpired
	case cause != nil && !FailedBefore(t, cause, e.NodeTimeout):
		// ctx ended the wait before the nodes failed to answer: the
		// Cause says so, and the release goes on (Detach).
		qe.Kind = nil
	}
	if qe.Kind == kind.ErrExpired {
		e.Log.Warn("redlock: lock had expired before unlock", "lock", l.name, "nodes", verdict.Summarize(qe.Nodes))
	}
	return qe.Nodes, qe
}

// releaseNode rolls back one node: one try at once, then, while the node
// cannot be reached, retries in the background. tried is closed, and ended
// run, after the first try.
func (e *Engine) releaseNode(i int, l *Lease, sure bool, tried chan struct{}, ended func()) {
	node := e.Nodes[i]
	ctx, cancel := context.WithTimeout(context.Background(), e.NodeTimeout)
	outcome, _, err := Answer(ctx, e.ReleaseCall(l, sure, false), node)
	cancel()
	if outcome == round.NodeFailed && !round.IsServerReply(err) {
		e.settling.retryStart(len(e.Nodes), i, l.names...) // retryRelease ends it
	}
	close(tried)
	if outcome != round.NodeFailed || round.IsServerReply(err) {
		ended()
		return
	}
	// The next attempt's call on this node (afterOwn) waits for the first
	// try, as for an Unlock's release, not for all the retries of a broken
	// link: they can take a TTL, and would hold back a node that answers
	// again. A try that timed out may still be on its way to the node,
	// though (a slow node or machine): then it waits for the next try too.
	if !round.IsTimeout(err) {
		ended()
		ended = nil
	}
	e.retryRelease(i, l, sure, ended)
}

// ReleaseCall is the release call for l, which Release and the rollbacks
// send. sure says that the node is known to have processed the
// acquisition call; otherwise a copy of it may still be in flight, and the
// script leaves a marker that keeps it from landing.
//
// announce publishes the release to waiters: Release does, a rollback not.
func (e *Engine) ReleaseCall(l *Lease, sure, announce bool) *nodescript.Call {
	var markerTTL any = 0
	if !sure {
		markerTTL = e.markerTTL(l)
	}
	return l.shape.Release(l, markerTTL, announce)
}

// unlockRound is Release's round split for a batch (round.Split).
type unlockRound Lease

func (r *unlockRound) Command(i int) []any {
	l := (*Lease)(r)
	return l.unlockCall(definite(l.acqOutcome[i])).Command()
}

func (r *unlockRound) Parse(_ int, cmd *redis.Cmd) (round.Outcome, int64, error) {
	return parseAnswer(cmd)
}

// unlockCall is Release's call, built once for all nodes.
func (l *Lease) unlockCall(sure bool) *nodescript.Call {
	i := 0
	if sure {
		i = 1
	}
	u := &l.unlockCalls[i]
	u.once.Do(func() { u.call = l.e.ReleaseCall(l, sure, true) })
	return u.call
}

// retryRelease keeps trying to release l on node i, which could not be
// reached, with growing pauses, for at most one TTL of the lock or until
// Close. ended, if not nil, is run once, as its first try ends (or as it
// gives up before one).
//
// It ends the retry that its caller registered (settling.retryStart) as it
// stops; when a try gets through, before ended lets the next attempt's call
// go to the node. A try gets through when the node answered it: granted or
// refused, the node holds no old value of this lease, and that call's
// refusal is no longer this client's own (a compat CI run saw "too few
// nodes answered" where B held the lock, the call sent between the two).
// A server's error reply (BUSY, LOADING, READONLY...) is final too, as for
// the first try (releaseNode), though the node did not apply the release:
// its old value then expires by its TTL.
func (e *Engine) retryRelease(i int, l *Lease, sure bool, ended func()) {
	node := e.Nodes[i]
	registered := true
	endRetry := func() {
		if registered {
			registered = false
			e.settling.retryEnd(i, l.names...)
		}
	}
	defer func() {
		if ended != nil {
			ended()
		}
		endRetry()
	}()
	ttl := l.TTL()
	deadline := time.Now().Add(ttl)
	pause := e.NodeTimeout
	for {
		if time.Now().Add(pause).After(deadline) {
			e.Log.Warn("redlock: gave up releasing on an unreachable node; the key expires by its TTL",
				"lock", l.name, "ttl", ttl)
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-e.Rounds.Closing():
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.NodeTimeout)
		outcome, _, err := Answer(ctx, e.ReleaseCall(l, sure, false), node)
		cancel()
		through := outcome != round.NodeFailed || round.IsServerReply(err)
		if through {
			endRetry()
		}
		if ended != nil {
			ended()
			ended = nil
		}
		if through {
			return
		}
		pause = min(2*pause, ttl/4)
	}
}
