package lease

import (
	"strconv"

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
	tail       []any // K, the slot, R: the last arguments of the acquisition
	index      any
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
		s := &slot{permitsKey: PermitsKey(prefix, name), index: i}
		s.init(prefix, slotName, value)
		s.tail = []any{permits, i, l.e.Args.Retention}
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
	if l.e.Fencing {
		return nodescript.NewCall(nodescript.SlotExtend, []any{s.keyArgs[0], s.permitsKey, l.e.Keys.ID, l.e.Keys.MaxTTL},
			s.value, ttlArg, s.index, l.e.Args.Retention, 1)
	}
	return nodescript.NewCall(nodescript.SlotExtend, []any{s.keyArgs[0], s.permitsKey}, s.value, ttlArg, s.index, l.e.Args.Retention, 0)
}
