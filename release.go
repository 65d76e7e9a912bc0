package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

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
