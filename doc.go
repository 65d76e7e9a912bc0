// Package redlock is a distributed lock over N independent Redis masters
// (the RedLock algorithm), for critical sections that must not run twice.
//
// A Client sends every operation to all nodes at once, each call bounded by a
// per-node timeout, and decides as soon as a majority (N/2+1) has answered
// either way. A lock is held when a majority set its key; it is valid until
//
//	Until = start + TTL - drift,   drift = TTL*driftFactor + 2ms
//
// where start is read from a monotonic clock before the first request is
// sent: every key was set after it. The caller is left TTL - elapsed - drift
// of it, elapsed being the time the acquisition took; an acquisition that
// leaves none fails (ErrNoValidity). A failed attempt is rolled back on every node, including those that did not
// answer. Locks can be extended, and Do keeps one extended while a function
// runs.
//
// # What is guaranteed
//
// While the holder's validity lasts, no other client acquires the same lock,
// provided that: the nodes are independent masters that keep their data (or
// stay down for a TTL after losing it); their clocks advance at about the
// same rate as the client's, within the drift factor; and the holder's
// process is not paused past its validity. Redis expires keys by its wall
// clock, so a node whose clock jumps forward can end a lock early.
//
// Mutual exclusion by leases alone cannot survive a holder that is paused
// (GC, swap, SIGSTOP) past its validity and then writes. Protect the data
// itself: see the fencing tokens (Lock.Token, package fence). With fencing
// on (the default) the deployment is provisioned once, with
// Client.Provision; nodes that lose their data, restart or are promoted
// from a replica sit out until they are repaired, which the clients do by
// themselves once a majority is intact (docs/fencing.md).
//
// Errors are *QuorumError values carrying the per-node outcomes; test them
// with errors.Is against ErrLocked, ErrUnavailable, ErrExpired and the other
// sentinels, and against context.Canceled or context.DeadlineExceeded. The
// message names each failed node's cause (a refused connection, an OOM
// reply, WRONGPASS), as does its NodeResult.Err. Lock gives up at once on
// failures no retry can fix (ErrAuth, ErrNoPermission, ErrScript,
// ErrFencingNode, ErrWrongType, ErrNotProvisioned) and, with WithLogger,
// warns about the others while it retries, at most once per lock name
// every 5 seconds; it gives up on them too once they have lasted
// WithMaxOutage (15 s by default), while a lock held by another owner is
// waited for until ctx ends.
//
// The TTL must exceed rounds × node timeout + drift (two rounds with
// fencing), so that an acquisition whose rounds each took a full node
// timeout still has validity left: with the defaults, at least 104 ms
// (MinTTL gives the formula; New's error gives the bound for its options).
//
// go-redis logs every failed dial to stderr. The lock client's errors
// already carry that cause; to silence go-redis process-wide, as the
// redlock command does, call logging.Disable() from
// github.com/redis/go-redis/v9/logging, or redis.SetLogger with a logger
// whose Printf does nothing.
//
// go-redis ignores context deadlines unless a client is built with
// ContextTimeoutEnabled. The lock client enforces its node timeout itself
// either way, but without that option calls to a paused node linger in the
// background until the go-redis ReadTimeout; enable it to free them sooner.
// A node whose calls have gone unanswered past the node timeout while a
// majority of the other nodes answered is not sent more until it answers
// (ErrNodeHung), so a hung node costs a client a few stuck calls, not one
// per lock. A silence most nodes share (an overloaded client machine, a
// burst of new connections) is waited out instead, for up to ten node
// timeouts: overload costs latency, not availability.
// Client.Close waits for calls still in flight for a bounded time only,
// then abandons them.
package redlock
