package redlock

import (
	"context"
	_ "embed"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Unlock deletes the lock on every node where it still holds this lock's
// value, and closes Done. The release is sent even if ctx is already done:
// ctx bounds only how long Unlock waits for the answers. Nodes that cannot
// be reached are retried in the background for up to one TTL.
//
// Unlock returns once the outcome is decided, without waiting for the
// slowest nodes: their calls go on in the background. Another
// client that tries the name at once may still be refused by such a node,
// and win or lose by the others as with any contention; this client's own
// next attempt on the name sends its call to each node only after the
// release's call there has ended, so it is never refused for this lock's
// old value (its majority waits for those releases, not its failure).
//
// It returns nil if a majority deleted the lock. It returns a *QuorumError
// with Kind ErrExpired if the lock was no longer held on a majority: the
// critical section may have overlapped another holder. ErrUnavailable means
// too few nodes answered to tell, within the round's patience (see
// WithNodeTimeout) or before ctx ended; in the last case ctx's error is
// its Cause and the silent nodes are NodeTimedOut with an Err that wraps
// it. Later calls return the first call's result.
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
		return answer(ctx, l.unlockCall(definite(l.acqOutcome[i])), node)
	}
	inFlight := c.settling.start(l.name, len(c.nodes))
	then := func(r round.Reply) {
		c.settling.callEnded(l.name, inFlight, r.Node)
		if !r.Sent {
			return
		}
		if r.Outcome == NodeFailed && !round.IsServerReply(r.Err) || r.Outcome == NodeTimedOut {
			c.retryRelease(c.nodes[r.Node], l, definite(l.acqOutcome[r.Node]), nil)
		}
	}
	// Decided at the majority: see settle.go for what the rest still do.
	roundStart := time.Now()
	t, cause := c.rounds.Run(ctx, round.Spec{Name: "unlock", Op: op, Then: then, Detach: true,
		After: l.acqDone, Sent: l.acqSent}, // nothing to release where nothing was sent
		(*round.Tally).WonOrRefused, nil)
	if t == nil {
		c.settling.forget(l.name, inFlight)
		return nil, cause
	}
	if t.Won() {
		inFlight.until.Store(int64(c.settleBy(t, roundStart).Sub(c.rounds.Epoch())))
	}
	if t.Won() {
		if c.cfg.observer != nil {
			return t.Snapshot(), nil
		}
		return nil, nil
	}
	qe := &QuorumError{Op: "unlock", Name: l.name, Kind: ErrUnavailable, Cause: cause, Nodes: t.Snapshot()}
	if t.RefusedByMajority() {
		qe.Kind = ErrExpired
	}
	if qe.Kind == ErrExpired {
		c.log.Warn("redlock: lock had expired before unlock", "lock", l.name, "nodes", summarize(qe.Nodes))
	}
	return qe.Nodes, qe
}

// releaseNode rolls back one node: one try at once, then, while the node
// cannot be reached, retries in the background. tried is closed, and ended
// run, after the first try.
func (c *Client) releaseNode(node redis.UniversalClient, l *Lock, sure bool, tried chan struct{}, ended func()) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.nodeTimeout)
	outcome, _, err := answer(ctx, c.releaseCall(l, sure, false), node)
	cancel()
	close(tried)
	if outcome != NodeFailed || round.IsServerReply(err) {
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
	c.retryRelease(node, l, sure, ended)
}

// releaseCall is the release script for l. sure says that the node is known
// to have processed the acquisition call; otherwise a copy of it may still be
// in flight, and the script leaves a marker that keeps it from landing.
//
// announce publishes the release to waiters: Unlock does, a rollback not.
func (c *Client) releaseCall(l *Lock, sure, announce bool) *nodescript.Call {
	var markerTTL any = 0
	if !sure {
		markerTTL = c.args.markerTTL
		if l.lease.ttl > c.cfg.ttl {
			// A late acquisition would set the key for the lock's own TTL.
			markerTTL = (10 * l.lease.ttl).Milliseconds()
		}
	}
	flag := 0
	if announce {
		flag = 1
	}
	return nodescript.NewCall(nodescript.Release, l.keyArgs, l.valueArg, markerTTL, flag, l.waiter, c.args.promiseFor)
}

// unlockCall is Unlock's release call, built once for all nodes.
func (l *Lock) unlockCall(sure bool) *nodescript.Call {
	i := 0
	if sure {
		i = 1
	}
	u := &l.unlockCalls[i]
	u.once.Do(func() { u.call = l.c.releaseCall(l, sure, true) })
	return u.call
}

// markerTTL is how long a release marker keeps a late acquisition call from
// landing: a node paused for longer than this may still apply one. A lock
// taken For longer than the client's TTL leaves markers ten of its TTLs long.
func (c *Client) markerTTL() time.Duration { return 10 * c.cfg.ttl }

// retryRelease keeps trying to release l on a node that could not be
// reached, with growing pauses, for at most one TTL of the lock or until
// Close. ended, if not nil, is run once, as its first try ends (or as it
// gives up before one).
func (c *Client) retryRelease(node redis.UniversalClient, l *Lock, sure bool, ended func()) {
	defer func() {
		if ended != nil {
			ended()
		}
	}()
	ttl := l.currentTTL()
	deadline := time.Now().Add(ttl)
	pause := c.cfg.nodeTimeout
	for {
		if time.Now().Add(pause).After(deadline) {
			c.log.Warn("redlock: gave up releasing on an unreachable node; the key expires by its TTL",
				"lock", l.name, "ttl", ttl)
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-c.rounds.Closing():
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.nodeTimeout)
		outcome, _, err := answer(ctx, c.releaseCall(l, sure, false), node)
		cancel()
		if ended != nil {
			ended()
			ended = nil
		}
		if outcome != NodeFailed || round.IsServerReply(err) {
			return
		}
		pause = min(2*pause, ttl/4)
	}
}
