package lease

import (
	"context"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
)

// Adopt makes l a lease on a hold that already exists under value (taken
// by another process, or an earlier run of this one), with the token it
// was committed under, and proves it held: one extension round, from
// start, with r's term. The nodes are taken to have granted the original
// acquisition, so a release reaches every one of them. On success l is
// held until start plus the validity of r's TTL; on failure err is a
// *verdict.Failure (ErrExpired when a majority no longer holds value), l is ended
// and nothing needs undoing: an extension only renews a key that holds
// value.
func (e *Engine) Adopt(ctx context.Context, l *Lease, r Request, value string, token uint64) (nodes []round.NodeResult, err error) {
	// A fenced extension counts each node by the id the node list check
	// admitted it with, as the original holder's did.
	if r.List, err = e.Deployment.AttemptList(ctx, r.Name); err != nil {
		return nil, err
	}
	e.initLease(l, r)
	l.value = value
	l.shape = r.Shape(l, r.Prefix, r.Name, value)
	l.list = r.List
	for i := range l.acqDone {
		l.acqOutcome[i], l.acqSent[i] = round.NodeGranted, true
		close(l.acqDone[i])
	}
	start := e.Clock.Now()
	// The deadline the extension will move to, if it wins: the timer must
	// be armed for the extension to move it.
	l.Acquired(token, nil, start.Add(e.Validity(r.Term.TTL)))
	until, nodes, err := l.extend(ctx, start, r.Term)
	if err != nil {
		l.mu.Lock()
		l.released = true
		l.timer.Stop()
		l.mu.Unlock()
		l.closeDone()
		if f, ok := err.(*verdict.Failure); ok {
			f.Op = "resume"
		}
		return nodes, err
	}
	if !until.After(e.Clock.Now()) {
		return nodes, &verdict.Failure{Op: "resume", Name: r.Name, Kind: kind.ErrExpired}
	}
	return nodes, nil
}
