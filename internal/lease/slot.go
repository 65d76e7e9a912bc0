package lease

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
)

// A semaphore's permit: n of its K slots held as one lease. Slot i of the
// semaphore is the mutex of the name SlotName(semaphore, i), with its keys
// and its token H; a permit of several slots is a multi-lock over their
// names, with one value, one TTL and one token committed as every slot's H
// (MultiCommit). Its acquisition checks the semaphore's size stored on
// each node and the semaphore's waiting line there (lua/sem_take.lua); its
// release tells the line (lua/sem_release.lua); its extension refuses a
// slot the stored size no longer has (lua/sem_extend.lua).

// permit is the Shape of one permit's lease.
type permit struct {
	acquire []any // the size key, the line's keys, the K slot keys, then per slot taken: key, marker, NEXT
	fenced  []any // the node's keys, then as acquire with H after each NEXT
	commit  []any // the node's keys, then every slot's H
	release []any // the line's QUEUE and SEEN, the K slot keys, then the five keys of Release per slot taken
	extend  []any // the size key, the node's id and longest TTL, then every slot's key
	slots   []any // the slots taken
	value   any
	permits int    // K
	version int64  // the version of K
	line    string // the line key
}

// SlotName is the name of slot i of the semaphore name: a mutex name.
func SlotName(name string, i int) string { return name + "#" + strconv.Itoa(i) }

// SlotNames are the names of slots of the semaphore name.
func SlotNames(name string, slots []int) []string {
	out := make([]string, len(slots))
	for j, i := range slots {
		out[j] = SlotName(name, i)
	}
	return out
}

// PermitsKey is the key of a semaphore's size, beside its name's keys.
func PermitsKey(prefix, name string) string { return prefix + ":{" + name + "}:permits" }

// LineKey is the key of a semaphore's waiting line; its queue's keys are
// QueueKey and SeenKey of it, and its channels those of a lock key.
func LineKey(prefix, name string) string { return prefix + ":{" + name + "}:line" }

// LineWaiter is the id in the line of waiter asking for n permits.
func LineWaiter(waiter string, n int) string { return waiter + "*" + strconv.Itoa(n) }

// Permit is the shape of a lease on slots (distinct, each below permits)
// of the semaphore name whose size is permits at version, for a Request
// whose Name is MultiName(SlotNames(name, slots)).
func Permit(name string, slots []int, permits int, version int64) func(l *Lease, prefix, _, value string) Shape {
	return func(l *Lease, prefix, _, value string) Shape {
		nk := &l.e.Keys
		line := LineKey(prefix, name)
		p := &permit{value: value, permits: permits, version: version, line: line}
		head := []any{PermitsKey(prefix, name), QueueKey(line), SeenKey(line), NextKey(line)}
		all := make([]any, permits)
		for i := range all {
			all[i], _, _ = LockKeys(prefix, SlotName(name, i))
		}
		p.acquire = append(head, all...)
		p.fenced = append(append([]any{nk.Counter, nk.ID, nk.Replid, nk.Lost, nk.Roster, nk.MaxTTL}, head...), all...)
		p.commit = []any{nk.Counter, nk.Floor, nk.ID, nk.Replid, nk.Lost, nk.Roster}
		p.release = append([]any{QueueKey(line), SeenKey(line)}, all...)
		p.extend = []any{head[0], nk.ID, nk.MaxTTL}
		for _, i := range slots {
			key, queue, seen := LockKeys(prefix, SlotName(name, i))
			marker, next := MarkerKey(key, value), NextKey(key)
			p.acquire = append(p.acquire, key, marker, next)
			p.fenced = append(p.fenced, key, marker, next, HighKey(key))
			p.commit = append(p.commit, HighKey(key))
			p.release = append(p.release, key, marker, next, queue, seen)
			p.extend = append(p.extend, key)
			p.slots = append(p.slots, i)
		}
		return p
	}
}

func (p *permit) Acquire(l *Lease, waitedUs int64) *nodescript.Call {
	e := l.e
	life := sizeLife(e, l.term.TTL)
	if e.Fencing {
		return nodescript.NewCall(nodescript.FencedSemAcquire, p.fenced,
			p.value, l.term.Arg, l.list.Roster, e.Args.StaleWaiter, waitedUs, l.waiter, p.permits, life, p.version)
	}
	return nodescript.NewCall(nodescript.SemAcquire, p.acquire,
		p.value, l.term.Arg, "", e.Args.StaleWaiter, waitedUs, l.waiter, p.permits, life, p.version)
}

func (p *permit) Commit(l *Lease, token int64) *nodescript.Call {
	return nodescript.NewCall(nodescript.MultiCommit, p.commit, token, l.e.Args.Retention, p.value, l.list.Roster)
}

func (p *permit) Release(l *Lease, markerTTL any, announce bool) *nodescript.Call {
	return nodescript.NewCall(nodescript.SemRelease, p.release, p.value, markerTTL, announceArg(announce), l.waiter, l.e.Args.PromiseFor, p.permits, p.line)
}

func (p *permit) Extend(l *Lease, ttlArg any) *nodescript.Call {
	ttl, _ := ttlArg.(int64)
	life := sizeLife(l.e, time.Duration(ttl)*time.Millisecond)
	if l.e.Fencing {
		return nodescript.NewCall(nodescript.SemExtend, append(slices.Clone(p.extend), p.commit[6:]...),
			append([]any{p.value, ttlArg, life, 1, p.permits}, p.slots...)...)
	}
	keys := append([]any{p.extend[0]}, p.extend[3:]...)
	return nodescript.NewCall(nodescript.SemExtend, keys, append([]any{p.value, ttlArg, life, 0, p.permits}, p.slots...)...)
}

// sizeLife is how long (ms) an acquisition or extension under ttl keeps
// the semaphore's stored size: the fencing retention, and at least two of
// the lease's TTLs, so that the size outlives every permit held (without
// fencing the retention is not tied to the TTL).
func sizeLife(e *Engine, ttl time.Duration) int64 {
	r, _ := e.Args.Retention.(int64)
	return max(r, (2 * ttl).Milliseconds())
}

// PermitName is the name of a permit over slots of the semaphore name.
func PermitName(name string, slots []int) string { return strings.Join(SlotNames(name, slots), ",") }
