package lease

// The keys a lease's scripts touch (the root package's keys.go lists every
// name the library builds). The per-lock keys share the lock key's hash
// tag ("{<name>}"), so a Redis Cluster can serve as one node; the per-node
// keys carry no tag, since each node is its own master.

// LockKeys returns the lock key of name and its queue's keys (QueueKey,
// SeenKey). They are prefixes of one another: one string holds all three.
func LockKeys(prefix, name string) (key, queue, seen string) {
	seen = prefix + ":{" + name + "}" + queueSuffix + seenSuffix
	key = seen[:len(seen)-len(queueSuffix)-len(seenSuffix)]
	queue = seen[:len(key)+len(queueSuffix)]
	return key, queue, seen
}

// MarkerKey is the release marker of value (lua/release.lua): it keeps an
// acquisition of that value still in flight from landing.
func MarkerKey(key, value string) string { return key + ":released:" + value }

// The keys of a lock's queue (the queue prelude). They share the lock's
// hash tag.
func NextKey(key string) string  { return key + ":next" }
func QueueKey(key string) string { return key + queueSuffix }
func SeenKey(key string) string  { return key + queueSuffix + seenSuffix }

const queueSuffix, seenSuffix = ":queue", ":seen"

// HighKey is H of a lock name: it shares the name's hash tag.
func HighKey(lockKey string) string { return lockKey + ":fence:high" }
