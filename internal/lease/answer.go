package lease

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Answer runs a call whose script answers 1 (done: NodeGranted) or 0 (not
// done: NodeRefused), as the acquisition, release and extension scripts do.
// A client that panics fails the call: the rollbacks and the release's
// retries call it on goroutines of their own, outside any round, where a
// panic would end the process (a review's replay,
// TestARollbackOnAPanickingClientFailsOnlyThatNode).
func Answer(ctx context.Context, call *nodescript.Call, node redis.UniversalClient) (o round.Outcome, v int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, v, err = round.NodeFailed, 0, fmt.Errorf("%w: %v", round.ErrBadNode, p)
		}
	}()
	return parseAnswer(call.Run(ctx, node))
}

// parseAnswer is Answer's outcome of cmd.
func parseAnswer(cmd *redis.Cmd) (round.Outcome, int64, error) {
	n, err := cmd.Int64()
	switch {
	case err != nil:
		return round.NodeFailed, 0, err
	case n == 1:
		return round.NodeGranted, 0, nil
	default:
		return round.NodeRefused, 0, nil
	}
}

// lostToPromises reports a waiter's attempt that some nodes granted and
// that so many nodes refused because the free lock was promised to other
// waiters that this one cannot be promised a majority. Waiters that joined
// at the same moment can stand in the nodes' queues in different orders,
// and a release then promises the lock to different waiters on different
// nodes: none of them can take a majority, and all would wait for the
// promises to expire (the promise period), again after each such release.
//
// Only that count says so. A waiter promised a majority may still lose an
// attempt, to a node that answers after the others (the contention grace):
// it must keep its promises and take the lock at its next attempt, or the
// waiters behind it would go first (TestMajorityPromiseSurvivesASlowNode).
// The count includes replies that came after the attempt was decided; each
// is a node promised to another waiter all the same.
func (l *Lease) lostToPromises(t *round.Tally) bool {
	return l.waiter != "" && t.Granted() > 0 && int(l.promisedElsewhere.Load()) > t.N-t.Majority
}
