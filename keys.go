package redlock

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/waiting"
)

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
//	<prefix>:node-*, <prefix>:fence:*        a node's identity and counters (nodescript.NodeKeys)
//	<lock key>:released                      channel: a release any waiter may take
//	<lock key>:promised:<client id>          channel: a promise to one client's waiter
//
// The channels' names are built in internal/fairqueue (channels.go).

func (c *Client) lockKey(name string) string { return c.cfg.keyPrefix + ":{" + name + "}" }

// leaveKeys and yieldKeys are the keys the leave and yield scripts take
// (fairqueue.Queue's Leave and Yield).
func leaveKeys(key string) []string {
	return []string{key, lease.NextKey(key), lease.QueueKey(key), lease.SeenKey(key)}
}
func yieldKeys(key string) []string { return []string{key, lease.NextKey(key)} }

// lockLine is the line of a lock key: its queue.
func lockLine(key string) waiting.Line {
	return waiting.Line{Key: key, Yield: yieldKeys(key), Leave: func(waiter string) *nodescript.Call {
		return nodescript.NewCall(nodescript.Leave, nodescript.BoxKeys(leaveKeys(key)...), waiter)
	}}
}

// The lock's queue as the lease scripts see it: how long a waiter or a
// promise lasts (config-derived script arguments). Leaving the queue,
// giving a promise back and the waiters' notifications are
// internal/fairqueue's; an attempt lost to promises is the lease engine's
// (verdict.Failure.LostToPromises).

// staleWaiter is how long after its last attempt a waiter still counts as
// waiting: the longest a live waiter sleeps, plus an attempt's round trip
// with slack. Each waiter's own client sets it (clients sharing a lock may
// retry at different paces), as the end of its liveness in SEEN.
func (c *Client) staleWaiter() int64 {
	return (c.cfg.retryDelayMax + 2*c.cfg.nodeTimeout).Milliseconds() + 1
}

// promiseFor is how long a released lock is kept for the first waiter:
// enough for the notification to reach it and its attempt to reach the
// nodes. If it died meanwhile, the lock is free again after this.
func (c *Client) promiseFor() int64 { return c.promiseLife().Milliseconds() + 1 }

func (c *Client) promiseLife() time.Duration { return 2 * c.cfg.nodeTimeout }

// line is the semaphore's line for requests of n permits. A waiter that
// gives up leaves it and wakes those behind it that the free slots can
// now serve: they may have been held back only by it.
func (s *Semaphore) line(n int) waiting.Line {
	c := s.c
	key := lease.LineKey(c.cfg.keyPrefix, s.name)
	keys := []any{lease.QueueKey(key), lease.SeenKey(key)}
	k := s.Permits()
	for i := range k {
		k, _, _ := lease.LockKeys(c.cfg.keyPrefix, lease.SlotName(s.name, i))
		keys = append(keys, k)
	}
	return waiting.Line{Key: key, Suffix: lease.LineWaiter("", n), Yield: yieldKeys(key), Leave: func(waiter string) *nodescript.Call {
		return nodescript.NewCall(nodescript.SemLeave, keys, waiter, k, key, c.promiseFor())
	}}
}

// validateName refuses, before anything is sent, a lock name that cannot
// make a key. The key is "<prefix>:{<name>}": its hash tag is the name up to
// its first '}', so braces inside a name keep every key of the lock in one
// hash slot and cannot make two names share a key (the prefix holds no
// braces, so the key's first '{' ends the prefix). Only a leading '}' leaves
// the tag empty.
func validateName(name string) error {
	switch {
	case name == "":
		return ErrEmptyName
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: %d bytes, at most %d; it begins %q", ErrNameTooLong, len(name), MaxNameLength, head(name, 32))
	case name[0] == '}':
		return fmt.Errorf("%w: %q", ErrBadName, head(name, 64))
	}
	return nil
}

// head is s cut to at most n bytes, on a rune boundary, for error messages
// that must not carry a whole, possibly huge, input.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// validateKeyPrefix refuses a prefix that would let two clients' keys
// alias: with "app" and "app:{x}" as prefixes, the names "x}:{y" and "y"
// would share the key "app:{x}:{y}" while minting tokens from two node-id
// namespaces ("app:node-id", "app:{x}:node-id"). An empty prefix is refused
// too: it is nearly always an unset setting, and it would silently put the
// client in another namespace than its peers, where they do not exclude it.
func validateKeyPrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("%w: got an empty prefix", ErrBadKeyPrefix)
	case strings.ContainsAny(prefix, "{}"):
		return fmt.Errorf("%w: got %q", ErrBadKeyPrefix, head(prefix, 64))
	}
	return nil
}
