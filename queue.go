package redlock

import "time"

// The lock's queue as the lease scripts see it: how long a waiter or a
// promise lasts (config-derived script arguments). Leaving the queue,
// giving a promise back and the waiters' notifications are
// internal/fairqueue's; an attempt lost to promises is the lease engine's
// (lease.Failure.LostToPromises).

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
