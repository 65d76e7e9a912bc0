package lease

import (
	"strconv"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
)

// A semaphore's permit: slot i of the semaphore is the mutex of the name
// SlotName(semaphore, i), with its keys, its token H and its queue. Its
// acquisition checks the semaphore's size stored on each node first
// (lua/permits.lua), and its extension refuses a slot the stored size no
// longer has (lua/slot_extend.lua). Commit and Release are the mutex's.

// slot is the Shape of one permit's lease.
type slot struct {
	mutex
	permitsKey any
	tail       []any // K, the slot, the size's lifetime: the last arguments of the acquisition
	index      any
	permits    any
}

// SlotName is the name of slot i of the semaphore name: a mutex name.
func SlotName(name string, i int) string { return name + "#" + strconv.Itoa(i) }

// PermitsKey is the key of a semaphore's size, beside its name's keys.
func PermitsKey(prefix, name string) string { return prefix + ":{" + name + "}:permits" }

// Slot is the shape of a lease on slot i of the semaphore name, whose
// client holds it has permits slots, for a Request whose Name is
// SlotName(name, i).
func Slot(name string, i, permits int) func(l *Lease, prefix, slotName, value string) Shape {
	return func(l *Lease, prefix, slotName, value string) Shape {
		s := &slot{permitsKey: PermitsKey(prefix, name), index: i, permits: permits}
		s.init(prefix, slotName, value)
		s.tail = []any{permits, i, sizeLife(l.e, l.term.TTL)}
		return s
	}
}

func (s *slot) Acquire(l *Lease, waitedUs int64) *nodescript.Call {
	e, k := l.e, s.keyArgs
	if e.Fencing {
		nk := &e.Keys
		keys := []any{k[0], k[1], HighKey(s.key), nk.Counter, nk.ID, nk.Replid, nk.Lost, nk.Roster, nk.MaxTTL, k[2], k[3], k[4], s.permitsKey}
		return nodescript.NewCall(nodescript.FencedSlotAcquire, keys,
			append([]any{s.value, l.term.Arg, l.waiter, e.Args.StaleWaiter, waitedUs, l.list.Roster}, s.tail...)...)
	}
	return nodescript.NewCall(nodescript.SlotAcquire, append(k[:5:5], s.permitsKey),
		append([]any{s.value, l.term.Arg, l.waiter, e.Args.StaleWaiter, waitedUs}, s.tail...)...)
}

func (s *slot) Extend(l *Lease, ttlArg any) *nodescript.Call {
	ttl, _ := ttlArg.(int64)
	life := sizeLife(l.e, time.Duration(ttl)*time.Millisecond)
	if l.e.Fencing {
		return nodescript.NewCall(nodescript.SlotExtend, []any{s.keyArgs[0], s.permitsKey, l.e.Keys.ID, l.e.Keys.MaxTTL},
			s.value, ttlArg, s.index, life, 1, s.permits)
	}
	return nodescript.NewCall(nodescript.SlotExtend, []any{s.keyArgs[0], s.permitsKey}, s.value, ttlArg, s.index, life, 0, s.permits)
}

// sizeLife is how long (ms) an acquisition or extension under ttl keeps
// the semaphore's stored size: the fencing retention, and at least two of
// the lease's TTLs, so that the size outlives every permit held (without
// fencing the retention is not tied to the TTL).
func sizeLife(e *Engine, ttl time.Duration) int64 {
	r, _ := e.Args.Retention.(int64)
	return max(r, (2 * ttl).Milliseconds())
}
