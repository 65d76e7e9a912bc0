package redlock

// Every key and channel name the package builds. The per-lock keys share
// the lock key's hash tag ("{<name>}"), so a Redis Cluster can serve as one
// node; the per-node keys carry no tag, since each node is its own master.
// The Lua scripts receive every key in KEYS; only the release and leave
// scripts build names themselves, the pub/sub channels below, from the lock
// key and the waiter's client id.
//
//	<prefix>:{<name>}                        the lock key (lockKey)
//	<lock key>:released:<value>              release marker of one value (markerKey)
//	<lock key>:next, :queue, :queue:seen     the lock's queue (queueKeys)
//	<lock key>:fence:high                    H, the name's committed token (highKey)
//	<prefix>:node-*, <prefix>:fence:*        a node's identity and counters (nodeKeys)
//	<lock key>:released                      channel: a release any waiter may take
//	<lock key>:promised:<client id>          channel: a promise to one client's waiter

func (c *Client) lockKey(name string) string { return c.cfg.keyPrefix + ":{" + name + "}" }

// lockKeys returns the lock key of name and its queue's keys (queueKey,
// seenKey). They are prefixes of one another: one string holds all three.
func lockKeys(prefix, name string) (key, queue, seen string) {
	seen = prefix + ":{" + name + "}" + queueSuffix + seenSuffix
	key = seen[:len(seen)-len(queueSuffix)-len(seenSuffix)]
	queue = seen[:len(key)+len(queueSuffix)]
	return key, queue, seen
}

// markerKey is the release marker of value (releaseScript): it keeps an
// acquisition of that value still in flight from landing.
func markerKey(key, value string) string { return key + ":released:" + value }

// The keys of a lock's queue (queueLua). They share the lock's hash tag.
func nextKey(key string) string  { return key + ":next" }
func queueKey(key string) string { return key + queueSuffix }
func seenKey(key string) string  { return key + queueSuffix + seenSuffix }

const queueSuffix, seenSuffix = ":queue", ":seen"

// highKey is H of a lock name: it shares the name's hash tag.
func highKey(lockKey string) string { return lockKey + ":fence:high" }

// nodeKeys are the per-node keys of the fencing state.
type nodeKeys struct {
	uuid, roster, id, replid, lost string // identity (identity.go)
	counter, floor, maxTTL         string // G, E, the longest TTL in use
}

func newNodeKeys(prefix string) nodeKeys {
	return nodeKeys{
		uuid:    prefix + ":node-uuid",
		roster:  prefix + ":node-roster",
		id:      prefix + ":node-id",
		replid:  prefix + ":node-replid",
		lost:    prefix + ":node-lost",
		counter: prefix + ":fence:counter",
		floor:   prefix + ":fence:floor",
		maxTTL:  prefix + ":fence:max-ttl",
	}
}

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
