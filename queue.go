package redlock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// leaveQueue takes a waiter that gave up out of the lock's queue on every
// node, in the background, withdrawing a promise made to it.
func (c *Client) leaveQueue(key, waiter string) {
	keys := []string{key, nextKey(key), queueKey(key), seenKey(key)}
	_, _ = c.fanOut(context.Background(), nil, nil, func(ctx context.Context, _ int, node redis.UniversalClient) (Outcome, int64, error) {
		err := leaveLua.Run(ctx, node, keys, waiter).Err()
		if err != nil {
			return NodeFailed, 0, err
		}
		return NodeGranted, 0, nil
	}, nil)
}

// staleWaiter is how long after its last attempt a waiter still counts as
// waiting: the longest a live waiter sleeps, plus an attempt's round trip
// with slack.
func (c *Client) staleWaiter() int64 {
	return (c.cfg.retryDelayMax + 2*c.cfg.nodeTimeout).Milliseconds() + 1
}

// promiseFor is how long a released lock is kept for the first waiter:
// enough for the notification to reach it and its attempt to reach the
// nodes. If it died meanwhile, the lock is free again after this.
func (c *Client) promiseFor() int64 { return (2 * c.cfg.nodeTimeout).Milliseconds() + 1 }
