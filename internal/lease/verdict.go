package lease

import (
	"time"

	"github.com/quorumlock/redlock/internal/round"
)

// An attempt's verdict and the rollback of what it took: a node whose call
// returned is rolled back once the attempt is lost, after its call and
// never before it, without holding a goroutine while the verdict is out.

// afterAcquire runs once node r.Node's acquisition call has returned, on
// the goroutine that delivered its reply (a worker, or the one that sent
// its batch): it must not block. If the attempt as a whole failed, the
// node is rolled back, after the call and never before it: by whichever
// comes second of this and the verdict (settleNode).
func (l *Lease) afterAcquire(r round.Reply) {
	i := r.Node
	l.acqOutcome[i] = r.Outcome
	l.acqSent[i] = r.Sent
	close(l.acqDone[i])
	// Until the node is settled, Close waits for it: it may have a
	// rollback to send.
	l.e.Rounds.Hold()
	if l.toSettle[i].Add(1) == 2 {
		l.settleNode(i)
	}
}

// decide closes the verdict, and settles the nodes whose calls have
// returned; the others are settled as they return (afterAcquire).
func (l *Lease) decide() {
	close(l.verdict)
	for i := range l.toSettle {
		if l.toSettle[i].Add(1) == 2 {
			l.settleNode(i)
		}
	}
}

// settleNode rolls node i back if the attempt failed, once both its call
// has returned and the attempt is decided, and ends afterAcquire's Hold.
func (l *Lease) settleNode(i int) {
	e := l.e
	defer e.Rounds.Unhold()
	if l.success {
		return // held
	}
	ended := func() { e.settling.callEnded(l.rollbacks, i, l.names...) }
	if !l.acqSent[i] || l.acqOutcome[i] == round.NodeRefused {
		// Nothing was sent there, or the node refused the call: it
		// processed it (no copy is in flight) and holds nothing of this
		// attempt's, so every release script would do nothing. A rollback
		// sent anyway to a slow node timed out and was retried, and its
		// retry counted the node's later refusals as this client's own:
		// contention with a slow minority turned into an outage, and
		// Lock gave up at WithMaxOutage on a lock that was merely held.
		ended()
		return
	}
	sure, tried := definite(l.acqOutcome[i]), l.rollbackTried[i]
	e.Rounds.GoHeld(func() { e.releaseNode(i, l, sure, tried, ended) })
}

// definite reports whether a call's outcome proves that the node processed
// it, so no copy of it can still be in flight.
func definite(o round.Outcome) bool { return o == round.NodeGranted || o == round.NodeRefused }

// Acquired turns a won attempt into a held lease with token, valid until
// until.
func (l *Lease) Acquired(token uint64, results []round.NodeResult, until time.Time) {
	l.token = token
	l.results = results
	l.until = until
	l.timer = l.e.Clock.AfterFunc(l.doneIn(until, l.term.TTL), l.closeDone)
	l.success = true
	l.decide()
}

// abandon settles a lost attempt: every node is rolled back after its call
// returns. It waits, for at most one node timeout, for the first rollback
// try on the nodes that granted, so a caller that retries does not trip over
// its own value; everything else is rolled back in the background.
func (l *Lease) abandon(t *round.Tally) {
	l.results = t.Snapshot()
	l.closeDone()
	l.rollbackTried = make([]chan struct{}, len(l.e.Nodes))
	for i := range l.rollbackTried {
		l.rollbackTried[i] = make(chan struct{})
	}
	// This client's next attempt on the name waits for the rollbacks, as
	// for an Unlock's releases (settle.go), for a node timeout at most.
	l.rollbacks = l.e.settling.start(len(l.e.Nodes), l.names...)
	l.rollbacks.until.Store(int64(time.Since(l.e.Rounds.Epoch()) + l.e.NodeTimeout))
	l.decide()
	wait := time.NewTimer(l.e.NodeTimeout)
	defer wait.Stop()
	for i, r := range l.results {
		if !t.Heard[i] || r.Outcome != round.NodeGranted {
			continue
		}
		select {
		case <-l.rollbackTried[i]:
		case <-wait.C:
			return
		}
	}
}
