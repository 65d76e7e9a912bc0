package redlock

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

func (c *Client) lockKey(name string) string { return c.cfg.keyPrefix + ":{" + name + "}" }

// The channels of a lock key: the one every client hears, and the one on
// which only this client hears of the waiters it was promised to. The
// release and leave scripts publish on the same names.
const (
	releasedSuffix = ":released"
	promisedInfix  = ":promised:"
)

func (n *notifier) channels(key string) [2]string {
	return [2]string{key + releasedSuffix, key + promisedInfix + n.c.id}
}
