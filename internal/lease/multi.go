package lease

import (
	"slices"
	"strings"

	"github.com/quorumlock/redlock/internal/nodescript"
)

// The multi-lock: several names held as one lease. Each member is the
// mutex's lock key of its name, so a multi-lock excludes a mutex on any of
// its names, and commits the name's H as the mutex does; the set has one
// value, one TTL, one token. Every step is one script per node over all
// the members, so a node holds all of them or none. A waiting multi-lock
// is one waiter in every member's queue (lua/multi_wait.lua).

// multi is the Shape of one multi-lock lease.
type multi struct {
	acquire []any // per member: lock key, marker, promise NEXT, QUEUE, SEEN
	fenced  []any // the fenced acquisition's keys: the node's, then per member key, marker, NEXT, H, QUEUE, SEEN
	try     []any // acquire without the queues' keys (no waiter)
	tryF    []any // fenced without them
	commit  []any // the commit's keys: the node's, then every member's H
	release []any // per member: the five keys of the mutex's release
	extend  []any // the node's id and longest TTL, then every member's lock key
	extendF []any // extend, then every member's H (fenced)
	value   any
}

// MultiName is the name of a multi-lock lease over names, in the events,
// logs and errors that name a lease: the names joined by commas.
func MultiName(names []string) string { return strings.Join(names, ",") }

// Multi is the shape of a lease over names (sorted, distinct), for a
// Request whose Name is MultiName(names).
func Multi(names []string) func(l *Lease, prefix, name, value string) Shape {
	return func(l *Lease, prefix, _, value string) Shape {
		nk := &l.e.Keys
		m := &multi{value: value}
		m.fenced = []any{nk.Counter, nk.ID, nk.Replid, nk.Lost, nk.Roster, nk.MaxTTL}
		m.tryF = slices.Clone(m.fenced)
		m.commit = []any{nk.Counter, nk.Floor, nk.ID, nk.Replid, nk.Lost, nk.Roster}
		m.extend = []any{nk.ID, nk.MaxTTL}
		for _, name := range names {
			key, queue, seen := LockKeys(prefix, name)
			marker, next := MarkerKey(key, value), NextKey(key)
			m.acquire = append(m.acquire, key, marker, next, queue, seen)
			m.fenced = append(m.fenced, key, marker, next, HighKey(key), queue, seen)
			m.try = append(m.try, key, marker, next)
			m.tryF = append(m.tryF, key, marker, next, HighKey(key))
			m.commit = append(m.commit, HighKey(key))
			m.release = append(m.release, key, marker, next, queue, seen)
			m.extend = append(m.extend, key)
		}
		m.extendF = append(slices.Clone(m.extend), m.commit[6:]...)
		return m
	}
}

func (m *multi) Acquire(l *Lease, waitedUs int64) *nodescript.Call {
	if l.waiter == "" {
		// TryLockMulti neither queues nor listens: the queues' keys and
		// arguments are left out, as TryLock's are.
		if l.e.Fencing {
			return nodescript.NewCall(nodescript.FencedMultiAcquire, m.tryF, m.value, l.term.Arg, l.list.Roster)
		}
		return nodescript.NewCall(nodescript.MultiAcquire, m.try, m.value, l.term.Arg)
	}
	if l.e.Fencing {
		return nodescript.NewCall(nodescript.FencedMultiAcquire, m.fenced, m.value, l.term.Arg, l.list.Roster, l.e.Args.StaleWaiter, waitedUs, l.waiter, l.e.Args.PromiseFor)
	}
	return nodescript.NewCall(nodescript.MultiAcquire, m.acquire, m.value, l.term.Arg, "", l.e.Args.StaleWaiter, waitedUs, l.waiter, l.e.Args.PromiseFor)
}

func (m *multi) Commit(l *Lease, token int64) *nodescript.Call {
	return nodescript.NewCall(nodescript.MultiCommit, m.commit, token, l.e.Args.Retention, m.value, l.list.Roster)
}

func (m *multi) Release(l *Lease, markerTTL any, announce bool) *nodescript.Call {
	return nodescript.NewCall(nodescript.MultiRelease, m.release, m.value, markerTTL, announceArg(announce), l.waiter, l.e.Args.PromiseFor)
}

func (m *multi) Extend(l *Lease, ttlArg any) *nodescript.Call {
	if l.e.Fencing {
		return nodescript.NewCall(nodescript.MultiExtend, m.extendF, m.value, ttlArg, 1, l.e.Args.Retention)
	}
	return nodescript.NewCall(nodescript.MultiExtend, m.extend[2:], m.value, ttlArg, 0)
}
