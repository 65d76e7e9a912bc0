package lease

import "github.com/quorumlock/redlock/internal/nodescript"

// The mutex: one key per name, holding the holder's value. Its keys are
// the lock key, "<prefix>:{<name>}", and beside it the release marker of
// the value and the queue's keys; the name's committed token H is
// "<lock key>:fence:high" (keys.go).

// mutex is the Shape of one mutex lease.
type mutex struct {
	key     string // the lock key, "<prefix>:{<name>}"
	marker  string // the release marker of this value
	keyArgs []any  // key, marker and the queue's keys, boxed for the scripts
	value   any    // the value, boxed
}

// Mutex is the shape of a mutex lease l on name under prefix, with l's
// value (a Request's Shape).
func Mutex(l *Lease, prefix, name, value string) Shape {
	l.mutex.init(prefix, name, value)
	return &l.mutex
}

func (m *mutex) init(prefix, name, value string) {
	key, queue, seen := LockKeys(prefix, name)
	m.key, m.marker, m.value = key, MarkerKey(key, value), value
	m.keyArgs = nodescript.BoxKeys(key, m.marker, NextKey(key), queue, seen)
}

// initKey is init for a lock key that is not a mutex's (a read-write
// lock's writer key).
func (m *mutex) initKey(key, value string) {
	m.key, m.marker, m.value = key, MarkerKey(key, value), value
	m.keyArgs = nodescript.BoxKeys(key, m.marker, NextKey(key), QueueKey(key), SeenKey(key))
}

// Key is the lock key of a mutex lease; "" for another shape.
func Key(s Shape) string {
	if m, ok := s.(*mutex); ok {
		return m.key
	}
	return ""
}

func (m *mutex) Acquire(l *Lease, waitedUs int64) *nodescript.Call {
	e, k := l.e, m.keyArgs
	if e.Fencing {
		nk := &e.Keys
		keys := []any{k[0], k[1], HighKey(m.key), nk.Counter, nk.ID, nk.Replid, nk.Lost, nk.Roster, nk.MaxTTL, k[2], k[3], k[4]}
		if l.waiter == "" {
			// TryLock never queues: the queue's list and arguments are not used.
			return nodescript.NewCall(nodescript.FencedAcquire, keys[:10], m.value, l.term.Arg, "", "", "", l.list.Roster)
		}
		return nodescript.NewCall(nodescript.FencedAcquire, keys, m.value, l.term.Arg, l.waiter, e.Args.StaleWaiter, waitedUs, l.list.Roster)
	}
	if l.waiter == "" {
		// TryLock never queues, so the script touches neither the queue nor
		// its arguments: left out, the call costs the node about 7% less.
		return nodescript.NewCall(nodescript.Acquire, k[:3], m.value, l.term.Arg, "")
	}
	return nodescript.NewCall(nodescript.Acquire, k, m.value, l.term.Arg, l.waiter, e.Args.StaleWaiter, waitedUs)
}

func (m *mutex) Commit(l *Lease, token int64) *nodescript.Call {
	nk := &l.e.Keys
	return nodescript.NewCall(nodescript.Commit, []any{HighKey(m.key), nk.Counter, nk.Floor, nk.ID, nk.Replid, nk.Lost, nk.Roster},
		token, l.e.Args.Retention, m.value, l.list.Roster)
}

func (m *mutex) Release(l *Lease, markerTTL any, announce bool) *nodescript.Call {
	return nodescript.NewCall(nodescript.Release, m.keyArgs, m.value, markerTTL, announceArg(announce), l.waiter, l.e.Args.PromiseFor)
}

func (m *mutex) Extend(l *Lease, ttlArg any) *nodescript.Call {
	if !l.e.Fencing {
		return nodescript.NewCall(nodescript.Extend, m.keyArgs[:1], m.value, ttlArg)
	}
	return nodescript.NewCall(nodescript.FencedExtend, []any{m.keyArgs[0], l.e.Keys.ID, l.e.Keys.MaxTTL, HighKey(m.key)},
		m.value, ttlArg, l.e.Args.Retention)
}

// announceArg is the release scripts' announce argument: 1 for an Unlock,
// which hands the lock over, 0 for a rollback.
func announceArg(announce bool) int {
	if announce {
		return 1
	}
	return 0
}
