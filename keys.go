package redlock

import (
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/waiting"
)

// Every key and channel name the package builds. The per-lock keys share
// the lock key's hash tag ("{<name>}"), so a Redis Cluster can serve as one
// node; the per-node keys carry no tag, since each node is its own master.
// The Lua scripts receive every key in KEYS; only the release and leave
// scripts build names themselves, the pub/sub channels below, from the lock
// key and the waiter's client id.
//
//	<prefix>:{<name>}                        the lock key (lockKey, lease.LockKeys)
//	<lock key>:released:<value>              release marker of one value (lease.MarkerKey)
//	<lock key>:next, :queue, :queue:seen     the lock's queue (lease.QueueKey...)
//	<lock key>:fence:high                    H, the name's committed token (lease.HighKey)
//	<prefix>:node-*, <prefix>:fence:*        a node's identity and counters (lease.NodeKeys)
//	<lock key>:released                      channel: a release any waiter may take
//	<lock key>:promised:<client id>          channel: a promise to one client's waiter
//
// The channels' names are built in internal/fairqueue (channels.go).

func (c *Client) lockKey(name string) string { return c.cfg.keyPrefix + ":{" + name + "}" }

// leaveKeys and yieldKeys are the keys the leave and yield scripts take
// (fairqueue.Queue's Leave and Yield).
func leaveKeys(key string) []string {
	return []string{key, lease.NextKey(key), lease.QueueKey(key), lease.SeenKey(key)}
}
func yieldKeys(key string) []string { return []string{key, lease.NextKey(key)} }

// lockLine is the line of a lock key: its queue.
func lockLine(key string) waiting.Line {
	return waiting.Line{Key: key, Yield: yieldKeys(key), Leave: func(waiter string) *nodescript.Call {
		return nodescript.NewCall(nodescript.Leave, nodescript.BoxKeys(leaveKeys(key)...), waiter)
	}}
}
