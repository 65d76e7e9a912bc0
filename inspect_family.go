package redlock

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// Inspect for the lock family: what the nodes hold of a multi-lock's
// members, a read-write lock and a semaphore. Each is one read-only round,
// with Client.Inspect's contract: a snapshot for dashboards and runbooks,
// stale the moment it returns, never a reason to touch the protected
// resource; fewer than a majority of answers is a *QuorumError (Op
// "inspect") beside what was heard.

// InspectMulti reads, in one round, what every node holds of each of
// names (a multi-lock's members, or any lock names that share a slot on a
// Cluster node), and judges each as Inspect judges a lock: one LockInfo per
// name, in the order given. A multi-lock holds all its members under one
// value, so while it is held they all show Held with the same Holder.
// names are checked as LockMulti checks them.
func (c *Client) InspectMulti(ctx context.Context, names []string) ([]LockInfo, error) {
	if _, err := c.multiNames(names); err != nil {
		return nil, err
	}
	keys := make([]any, 0, 2*len(names))
	for _, n := range names {
		key := c.lockKey(n)
		keys = append(keys, key)
		if c.cfg.fencing {
			keys = append(keys, lease.HighKey(key))
		}
	}
	call := nodescript.NewCall(nodescript.InspectMulti, keys, len(keys)/len(names))
	r, err := inspectRound(ctx, c, lease.MultiName(names), call, func(cmd *redis.Cmd) ([]NodeLock, error) {
		v, err := cmd.Slice()
		if err != nil {
			return nil, wrongTypeOf(err)
		}
		return parseLocks(v, len(names))
	})
	if r == nil {
		return nil, err
	}
	return judgeLocks(names, r, err, c.cfg.driftOf), err
}

// judgeLocks makes one LockInfo per name of r's answers (each node's a
// NodeLock per name), judged unless err says too few answered.
func judgeLocks(names []string, r *inspected[[]NodeLock], err error, driftOf func(time.Duration) time.Duration) []LockInfo {
	infos := make([]LockInfo, len(names))
	for j, name := range names {
		info := LockInfo{Name: name, Nodes: make([]NodeLock, len(r.answers))}
		for i, a := range r.answers {
			var n NodeLock
			if a != nil {
				n = a[j]
			}
			n.Node, n.Err, n.Latency = i, r.errs[i], r.latency[i]
			info.Nodes[i] = n
		}
		if err == nil {
			info.judge(r.majority, r.elapsed, driftOf)
		}
		infos[j] = info
	}
	return infos
}

// RWLockInfo is what RWMutex.Inspect saw of a read-write lock.
type RWLockInfo struct {
	Name string
	// Write is the write hold, judged as Client.Inspect judges a lock:
	// Held, Holder, Remaining, and Token, the writers' committed token.
	Write LockInfo
	// Readers are the read holds each on a majority of the nodes, the
	// longest remaining first. A node lists at most MaxInspectReaders.
	Readers []ReadHold
	// ReadToken is the largest reader token committed, among the nodes
	// that answered; 0 with fencing off.
	ReadToken uint64
	// WritersQueued is how many live writers are in the lock's queue on a
	// majority (the majority-th largest count): while any is, new readers
	// are refused. A writer that took the lock from the queue stays in it
	// until it unlocks (the nodes hand the lock on in queue order), so a
	// write hold that waited counts here too.
	WritersQueued int
	// Nodes are each node's answer about readers and waiters, in the
	// order given to New (Write.Nodes has the writer's key).
	Nodes []NodeRW
}

// ReadHold is one read hold as the nodes see it.
type ReadHold struct {
	Holder string // the reader's id, one per acquisition
	// Remaining: as LockInfo.Remaining, for the reader's own entry.
	Remaining time.Duration
}

// NodeRW is what one node holds of a read-write lock's readers and queue.
type NodeRW struct {
	Node          int
	Err           error                    // as NodeLock.Err
	Readers       map[string]time.Duration // live reader -> time left
	WritersQueued int
	ReadToken     uint64
	Latency       time.Duration
}

// MaxInspectReaders bounds the readers one node lists to RWMutex.Inspect.
const MaxInspectReaders = 1000

// rwAnswer is one node's reply to RWInspect.
type rwAnswer struct {
	write NodeLock
	rest  NodeRW
}

// Inspect reads what every node holds of the read-write lock: its writer,
// its readers and the writers waiting, with Client.Inspect's contract.
func (m *RWMutex) Inspect(ctx context.Context) (RWLockInfo, error) {
	c := m.c
	info := RWLockInfo{Name: m.name, Write: LockInfo{Name: m.name}}
	key := lease.RWKey(c.cfg.keyPrefix, m.name)
	keys := []any{key, lease.ReadersKey(key), lease.SeenKey(key)}
	if c.cfg.fencing {
		keys = append(keys, lease.HighKey(key), lease.ReadHighKey(key))
	}
	call := nodescript.NewCall(nodescript.RWInspect, keys, MaxInspectReaders)
	r, err := inspectRound(ctx, c, m.name, call, parseRWInspect)
	if r == nil {
		return info, err
	}
	info.Write.Nodes = make([]NodeLock, len(r.answers))
	info.Nodes = make([]NodeRW, len(r.answers))
	var waiting []int
	counts := map[string][]time.Duration{}
	for i, a := range r.answers {
		w, n := a.write, a.rest
		w.Node, w.Err, w.Latency = i, r.errs[i], r.latency[i]
		n.Node, n.Err, n.Latency = i, r.errs[i], r.latency[i]
		info.Write.Nodes[i], info.Nodes[i] = w, n
		if n.Err != nil {
			continue
		}
		info.ReadToken = max(info.ReadToken, n.ReadToken)
		waiting = append(waiting, n.WritersQueued)
		for reader, left := range n.Readers {
			counts[reader] = append(counts[reader], left)
		}
	}
	if err != nil {
		return info, err
	}
	info.Write.judge(r.majority, r.elapsed, c.cfg.driftOf)
	info.WritersQueued = majorityTh(waiting, r.majority)
	for reader, lefts := range counts {
		if len(lefts) < r.majority {
			continue
		}
		agreed := majorityTh(lefts, r.majority)
		info.Readers = append(info.Readers, ReadHold{reader, max(agreed-r.elapsed-c.cfg.driftOf(agreed), 0)})
	}
	slices.SortFunc(info.Readers, func(a, b ReadHold) int {
		if a.Remaining != b.Remaining {
			return cmp.Compare(b.Remaining, a.Remaining)
		}
		return strings.Compare(a.Holder, b.Holder)
	})
	return info, nil
}

// majorityTh is the majority-th largest of vs (that many nodes say at
// least so much), or the zero value with fewer.
func majorityTh[T int | time.Duration](vs []T, majority int) T {
	if len(vs) < majority || majority < 1 {
		var zero T
		return zero
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)-majority]
}

// parseRWInspect reads nodescript.RWInspect's reply.
func parseRWInspect(cmd *redis.Cmd) (rwAnswer, error) {
	v, err := cmd.Slice()
	if err != nil {
		return rwAnswer{}, wrongTypeOf(err)
	}
	if len(v) != 6 {
		return rwAnswer{}, fmt.Errorf("redlock: unexpected reply %v", v)
	}
	locks, err := parseLocks(v[:3], 1)
	if err != nil {
		return rwAnswer{}, err
	}
	a := rwAnswer{write: locks[0]}
	a.rest.ReadToken, _ = strconv.ParseUint(fmt.Sprint(v[3]), 10, 64)
	waiting, _ := v[4].(int64)
	a.rest.WritersQueued = int(waiting)
	list, _ := v[5].([]any)
	a.rest.Readers = make(map[string]time.Duration, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		reader, _ := list[i].(string)
		left, _ := list[i+1].(int64)
		a.rest.Readers[reader] = time.Duration(left) * time.Millisecond
	}
	return a, nil
}

// parseLocks reads n lock answers of three entries each, as inspect.lua's.
func parseLocks(v []any, n int) ([]NodeLock, error) {
	if len(v) != 3*n {
		return nil, fmt.Errorf("redlock: unexpected reply %v", v)
	}
	out := make([]NodeLock, n)
	for j := range out {
		holder, _ := v[3*j].(string)
		pttl, _ := v[3*j+1].(int64)
		token, _ := strconv.ParseUint(fmt.Sprint(v[3*j+2]), 10, 64)
		out[j] = NodeLock{Holder: holder, Token: token}
		if holder != "" && pttl > 0 {
			out[j].TTL = time.Duration(pttl) * time.Millisecond
		}
	}
	return out, nil
}

// wrongTypeOf is err, or a *WrongTypeError when a node named a key of
// another type.
func wrongTypeOf(err error) error {
	if strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return kind.WrongType(err)
	}
	return err
}

// MarshalJSON writes Err as its message, as NodeLock's does.
func (n NodeRW) MarshalJSON() ([]byte, error) {
	type plain NodeRW
	return json.Marshal(struct {
		plain
		Err string `json:",omitempty"`
	}{plain(n), errText(n.Err)})
}
