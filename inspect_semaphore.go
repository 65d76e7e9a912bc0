package redlock

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// SemaphoreInfo is what Semaphore.Inspect saw of a semaphore.
type SemaphoreInfo struct {
	Name string
	// Permits is the size K stored on a majority of the nodes; 0 when no
	// majority agrees (none stored yet: no acquisition since the size's
	// lifetime ran out; or a SetPermits under way).
	Permits int
	// Version is the latest version at which a node that agrees on
	// Permits stores it (0: no SetPermits wrote it).
	Version int64
	// Slots are the K slots of the Semaphore inspected (its Permits), each
	// judged as Client.Inspect judges a lock. A permit of n slots holds
	// them all under one Holder.
	Slots []LockInfo
	// Holders are the permits held, one per Holder, with the slots each
	// holds, the least Remaining of them first.
	Holders []PermitHold
	// Free is how many of Slots no permit holds.
	Free int
	// Waiting is how many live waiters are in the semaphore's line on a
	// majority (the majority-th largest count): Acquire and AcquireN calls
	// that wait for slots, in arrival order.
	Waiting int
	// Nodes are each node's answer about the size and the line, in the
	// order given to New (each slot's Nodes has the slot's key).
	Nodes []NodeSemaphore
}

// PermitHold is one permit as the nodes see it.
type PermitHold struct {
	Holder string // the permit's id, one per acquisition
	Slots  []int  // the slots it holds, in order
	// Remaining is the least of its slots' Remaining (LockInfo's).
	Remaining time.Duration
	// Token is the permit's fencing token as its slots show it (the
	// largest of their Tokens); 0 with fencing off.
	Token uint64
}

// NodeSemaphore is what one node holds of a semaphore's size and line.
type NodeSemaphore struct {
	Node    int
	Err     error // as NodeLock.Err
	Permits int   // the size stored; 0 for none
	Version int64 // its version (0: no SetPermits wrote it)
	Waiting int   // live waiters in the line
	Latency time.Duration
}

// semAnswer is one node's reply to SemInspect.
type semAnswer struct {
	size  NodeSemaphore
	slots []NodeLock
}

// Inspect reads what every node holds of the semaphore: the size stored,
// which of this Semaphore's Permits slots are held, by which permit and
// for how long, and who waits, with Client.Inspect's contract. It reads
// the slots of this Semaphore's size: with a larger stored size (a client
// built with another number), slots above it are not shown.
func (s *Semaphore) Inspect(ctx context.Context) (SemaphoreInfo, error) {
	c := s.c
	info := SemaphoreInfo{Name: s.name}
	line := lease.LineKey(c.cfg.keyPrefix, s.name)
	keys := []any{lease.PermitsKey(c.cfg.keyPrefix, s.name), lease.SeenKey(line)}
	k := s.Permits()
	names := make([]string, k)
	for i := range names {
		names[i] = lease.SlotName(s.name, i)
		key := c.lockKey(names[i])
		keys = append(keys, key)
		if c.cfg.fencing {
			keys = append(keys, lease.HighKey(key))
		}
	}
	stride := (len(keys) - 2) / k
	call := nodescript.NewCall(nodescript.SemInspect, keys, stride)
	r, err := inspectRound(ctx, c, s.name, call, func(cmd *redis.Cmd) (semAnswer, error) {
		return parseSemInspect(cmd, k)
	})
	if r == nil {
		return info, err
	}
	slots := &inspected[[]NodeLock]{answers: make([][]NodeLock, len(r.answers)), errs: r.errs, latency: r.latency, elapsed: r.elapsed, majority: r.majority}
	var sizes, waiting []int
	info.Nodes = make([]NodeSemaphore, len(r.answers))
	for i, a := range r.answers {
		n := a.size
		n.Node, n.Err, n.Latency = i, r.errs[i], r.latency[i]
		info.Nodes[i] = n
		slots.answers[i] = a.slots
		if n.Err == nil {
			sizes = append(sizes, n.Permits)
			waiting = append(waiting, n.Waiting)
		}
	}
	info.Slots = judgeLocks(names, slots, err, c.cfg.driftOf)
	if err != nil {
		return info, err
	}
	info.Permits = agreedSize(sizes, r.majority)
	for _, n := range info.Nodes {
		if n.Err == nil && n.Permits == info.Permits && info.Permits > 0 {
			info.Version = max(info.Version, n.Version)
		}
	}
	info.Waiting = majorityTh(waiting, r.majority)
	byHolder := map[string]*PermitHold{}
	for i, slot := range info.Slots {
		if !slot.Held {
			info.Free++
			continue
		}
		h := byHolder[slot.Holder]
		if h == nil {
			h = &PermitHold{Holder: slot.Holder, Remaining: slot.Remaining}
			byHolder[slot.Holder] = h
		}
		h.Slots = append(h.Slots, i)
		h.Remaining = min(h.Remaining, slot.Remaining)
		h.Token = max(h.Token, slot.Token)
	}
	for _, h := range byHolder {
		info.Holders = append(info.Holders, *h)
	}
	slices.SortFunc(info.Holders, func(a, b PermitHold) int {
		if a.Remaining != b.Remaining {
			return cmp.Compare(a.Remaining, b.Remaining)
		}
		return strings.Compare(a.Holder, b.Holder)
	})
	return info, nil
}

// agreedSize is the size that at least majority of sizes give, or 0.
func agreedSize(sizes []int, majority int) int {
	count := map[int]int{}
	for _, k := range sizes {
		count[k]++
		if k != 0 && count[k] >= majority {
			return k
		}
	}
	return 0
}

// parseSemInspect reads nodescript.SemInspect's reply for k slots.
func parseSemInspect(cmd *redis.Cmd, k int) (semAnswer, error) {
	v, err := cmd.Slice()
	if err != nil {
		return semAnswer{}, wrongTypeOf(err)
	}
	if len(v) != 4 {
		return semAnswer{}, fmt.Errorf("redlock: unexpected reply %v", v)
	}
	version, _ := v[3].(int64)
	size, _ := v[0].(int64)
	waiting, _ := v[1].(int64)
	list, _ := v[2].([]any)
	slots, err := parseLocks(list, k)
	if err != nil {
		return semAnswer{}, err
	}
	return semAnswer{size: NodeSemaphore{Permits: int(size), Version: version, Waiting: int(waiting)}, slots: slots}, nil
}

// MarshalJSON writes Err as its message, as NodeLock's does.
func (n NodeSemaphore) MarshalJSON() ([]byte, error) {
	type plain NodeSemaphore
	return json.Marshal(struct {
		plain
		Err string `json:",omitempty"`
	}{plain(n), errText(n.Err)})
}
