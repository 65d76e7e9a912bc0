package redlock

import (
	"context"
	_ "embed"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// leaveQueue takes a waiter that gave up out of the lock's queue on every
// node, in the background, withdrawing a promise made to it.
func (c *Client) leaveQueue(key, waiter string, after []chan struct{}) {
	keys := []string{key, lease.NextKey(key), lease.QueueKey(key), lease.SeenKey(key)}
	select {
	case <-c.rounds.Closing():
		c.leaveClosed(keys, waiter, after)
		return
	default:
	}
	_, _ = c.rounds.FanOut(context.Background(), "leave", after, nil, func(ctx context.Context, _ int, node redis.UniversalClient) (Outcome, int64, error) {
		err := nodescript.Leave.Run(ctx, node, keys, waiter).Err()
		if err != nil {
			return NodeFailed, 0, err
		}
		return NodeGranted, 0, nil
	}, nil)
}

// leaveClosed is leaveQueue for a Lock that Close ended: the closed
// client's fan-out sends nothing, and every waiter left queued would be
// promised the lock in turn, a promise period each, while nobody can take
// it. The Lock waits for the leaves a node timeout at most: a call to a
// node that does not answer (paused, with go-redis clients that ignore
// deadlines) is abandoned, and ends when the node answers, as Close's are.
// As in leaveQueue, the leave on node i goes after the last attempt's call
// there (after[i]): that call, still in flight when Close ended the wait,
// would otherwise land after the leave and queue the waiter again. A call
// that has not returned within the bound leaves the waiter queued there.
func (c *Client) leaveClosed(keys []string, waiter string, after []chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.nodeTimeout)
	var wg sync.WaitGroup
	for i, node := range c.nodes {
		wg.Go(func() {
			if after != nil && after[i] != nil {
				select {
				case <-after[i]:
				case <-ctx.Done():
					return
				}
			}
			_ = nodescript.Leave.Run(ctx, node, keys, waiter).Err()
		})
	}
	left := make(chan struct{})
	go func() {
		wg.Wait()
		cancel()
		close(left)
	}()
	t := time.NewTimer(c.cfg.nodeTimeout)
	defer t.Stop()
	select {
	case <-left:
	case <-t.C:
	}
}

// staleWaiter is how long after its last attempt a waiter still counts as
// waiting: the longest a live waiter sleeps, plus an attempt's round trip
// with slack. Each waiter's own client sets it (clients sharing a lock may
// retry at different paces), as the end of its liveness in SEEN.
func (c *Client) staleWaiter() int64 {
	return (c.cfg.retryDelayMax + 2*c.cfg.nodeTimeout).Milliseconds() + 1
}

// promiseFor is how long a released lock is kept for the first waiter:
// enough for the notification to reach it and its attempt to reach the
// nodes. If it died meanwhile, the lock is free again after this.
func (c *Client) promiseFor() int64 { return c.promiseLife().Milliseconds() + 1 }

func (c *Client) promiseLife() time.Duration { return 2 * c.cfg.nodeTimeout }

// yieldPromise gives back, on every node, a promise of the lock to waiter,
// and where it did, publishes an empty notification, which wakes each
// waiting client's oldest waiter for the lock. Lock calls it after an
// attempt lost to promises made to other waiters (lostToPromises); each of
// them does the same, and they retry after short random delays (split
// votes). It does not wait for the nodes.
//
// A yield that lands after the next release promised the lock to the same
// waiter again takes that promise back too: the lock is then open to all
// until someone takes it. That costs the waiter its turn, not the lock its
// safety; it needs a release within the yield's flight.
func (c *Client) yieldPromise(key, waiter string) {
	keys := []string{key, lease.NextKey(key)}
	_, _ = c.rounds.FanOut(context.Background(), "yield", nil, nil, func(ctx context.Context, _ int, node redis.UniversalClient) (Outcome, int64, error) {
		if err := nodescript.Yield.Run(ctx, node, keys, waiter).Err(); err != nil {
			return NodeFailed, 0, err
		}
		return NodeGranted, 0, nil
	}, nil)
}
