package fairqueue

import (
	"context"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Leave takes a waiter that gave up out of the lock's queue on every
// node, in the background, withdrawing a promise made to it: leave is the
// call that does it there (nodescript.Leave on the lock key and its
// queue's keys, or a semaphore's SemLeave).
func (q *Queue) Leave(leave *nodescript.Call, after []chan struct{}) {
	select {
	case <-q.rounds.Closing():
		q.leaveClosed(leave, after)
		return
	default:
	}
	_, _ = q.rounds.FanOut(context.Background(), "leave", after, nil, func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		err := leave.Run(ctx, node).Err()
		if err != nil {
			return round.NodeFailed, 0, err
		}
		return round.NodeGranted, 0, nil
	}, nil)
}

// leaveClosed is Leave for a Lock that Close ended: the closed
// client's fan-out sends nothing, and every waiter left queued would be
// promised the lock in turn, a promise period each, while nobody can take
// it. The Lock waits for the leaves a node timeout at most: a call to a
// node that does not answer (paused, with go-redis clients that ignore
// deadlines) is abandoned, and ends when the node answers, as Close's are.
// As in Leave, the leave on node i goes after the last attempt's call
// there (after[i]): that call, still in flight when Close ended the wait,
// would otherwise land after the leave and queue the waiter again. A call
// that has not returned within the bound leaves the waiter queued there.
func (q *Queue) leaveClosed(leave *nodescript.Call, after []chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.NodeTimeout)
	var wg sync.WaitGroup
	for i, node := range q.nodes {
		wg.Go(func() {
			if after != nil && after[i] != nil {
				select {
				case <-after[i]:
				case <-ctx.Done():
					return
				}
			}
			_ = leave.Run(ctx, node).Err()
		})
	}
	left := make(chan struct{})
	go func() {
		wg.Wait()
		cancel()
		close(left)
	}()
	t := time.NewTimer(q.cfg.NodeTimeout)
	defer t.Stop()
	select {
	case <-left:
	case <-t.C:
	}
}

// Yield gives back, on every node, a promise of the lock to waiter,
// and where it did, publishes an empty notification, which wakes each
// waiting client's oldest waiter for the lock. Lock calls it after an
// attempt lost to promises made to other waiters (the root's
// lostToPromises); each of them does the same, and they retry after short
// random delays (split votes). It does not wait for the nodes. keys are the
// lock key and its next key, as the yield script takes them.
//
// A yield that lands after the next release promised the lock to the same
// waiter again takes that promise back too: the lock is then open to all
// until someone takes it. That costs the waiter its turn, not the lock its
// safety; it needs a release within the yield's flight.
func (q *Queue) Yield(keys []string, waiter string) {
	_, _ = q.rounds.FanOut(context.Background(), "yield", nil, nil, func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		if err := nodescript.Yield.Run(ctx, node, keys, waiter).Err(); err != nil {
			return round.NodeFailed, 0, err
		}
		return round.NodeGranted, 0, nil
	}, nil)
}
