package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// What doctor reads of each node's fencing state, its fenced keys and its
// memory. Whether a node counts (is intact) is the library's judgement
// (Client.NodeIDs); the raw keys read here only explain why not, and how
// long its repair will wait.

// fencingFacts is one node's fencing state as stored, and its fenced keys.
type fencingFacts struct {
	HasUUID        bool          `json:"has_uuid"`
	HasRoster      bool          `json:"has_roster"`
	IDMarker       *int          `json:"id_marker,omitempty"`
	RecordedReplID string        `json:"recorded_replid,omitempty"` // the replication id it was provisioned under
	OutSince       int64         `json:"out_since_ms,omitempty"`    // node ms when first found not intact
	Counter        int64         `json:"counter"`                   // G
	MaxTTL         time.Duration `json:"max_ttl_ns"`                // the longest TTL any client recorded here
	DBSize         int64         `json:"dbsize"`
	FencedKeys     int64         `json:"fenced_keys"` // <prefix>:{name}:fence:high, one per name committed within the retention
	ScanComplete   bool          `json:"scan_complete"`
	// Keys the library keeps strings in that hold another type (a key-name
	// clash): how many, and the first few as "key (a type)".
	WrongType        int64    `json:"wrong_type_keys,omitempty"`
	WrongTypeExample []string `json:"wrong_type_examples,omitempty"`
	Error            string   `json:"error,omitempty"`
}

// wrongTypeExamples bounds the keys of the wrong type a report names.
const wrongTypeExamples = 3

// checkTypes counts the keys that hold another type than a string, with
// one pipelined TYPE per key.
func (ff *fencingFacts) checkTypes(ctx context.Context, c redis.UniversalClient, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.StatusCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Type(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for i, cmd := range cmds {
		if t := cmd.Val(); t != "string" && t != "none" {
			ff.WrongType++
			if len(ff.WrongTypeExample) < wrongTypeExamples {
				ff.WrongTypeExample = append(ff.WrongTypeExample, fmt.Sprintf("%s (a %s)", keys[i], t))
			}
		}
	}
	return nil
}

// memoryFacts is INFO memory.
type memoryFacts struct {
	Used       int64  `json:"used_bytes"`
	NotCounted int64  `json:"not_counted_bytes"` // buffers maxmemory does not count (mem_not_counted_for_evict)
	Max        int64  `json:"maxmemory_bytes"`   // 0: no limit
	Policy     string `json:"policy,omitempty"`
}

// The per-node keys of the library's fencing state (nodescript.NewNodeKeys).
var stateKeys = []string{":node-uuid", ":node-roster", ":node-id", ":node-replid", ":node-lost", ":fence:counter", ":fence:max-ttl"}

const (
	scanBatch    = 1000
	maxScanCalls = 100000 // with the time budget, bounds the count on a huge node
	memoryWarn   = 0.8
)

// readFencing reads node c's fencing keys, and counts its fenced keys with
// SCAN for at most scanTime.
func readFencing(ctx context.Context, c redis.UniversalClient, prefix string, scanTime time.Duration) *fencingFacts {
	ff := &fencingFacts{}
	keys := make([]string, len(stateKeys))
	for i, k := range stateKeys {
		keys[i] = prefix + k
	}
	v, err := c.MGet(ctx, keys...).Result()
	if err != nil {
		ff.Error = "MGET: " + err.Error()
		return ff
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
	ff.HasUUID, ff.HasRoster = str(0) != "", str(1) != ""
	if id, err := strconv.Atoi(str(2)); err == nil {
		ff.IDMarker = &id
	}
	ff.RecordedReplID, ff.OutSince, ff.Counter = str(3), num(4), num(5)
	ff.MaxTTL = time.Duration(num(6)) * time.Millisecond
	// MGET reads a key of another type as missing.
	if err := ff.checkTypes(ctx, c, keys); err != nil {
		ff.Error = "TYPE: " + err.Error()
		return ff
	}

	if ff.DBSize, err = c.DBSize(ctx).Result(); err != nil {
		ff.Error = "DBSIZE: " + err.Error()
		return ff
	}
	pattern := globEscape(prefix) + ":{*}:fence:high"
	deadline := time.Now().Add(scanTime)
	var cursor uint64
	for range maxScanCalls {
		var batch []string
		batch, cursor, err = c.Scan(ctx, cursor, pattern, scanBatch).Result()
		if err != nil {
			ff.Error = "SCAN: " + err.Error()
			return ff
		}
		ff.FencedKeys += int64(len(batch))
		if err := ff.checkTypes(ctx, c, batch); err != nil {
			ff.Error = "TYPE: " + err.Error()
			return ff
		}
		if cursor == 0 {
			ff.ScanComplete = true
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	return ff
}

// globEscape quotes the characters SCAN's MATCH treats as patterns.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func judgeMemory(i int, f nodeFacts, add func(int, string, status, string, ...any)) {
	m := f.Memory
	used := m.Used - m.NotCounted
	switch {
	case m.Max == 0:
		add(i, "memory", statusOK, "%s used, no maxmemory: the node grows until the host runs out of memory", bytesOf(m.Used))
	case used >= m.Max && m.Policy == "noeviction":
		add(i, "memory", statusFail, "full: %s used of maxmemory %s with noeviction: the node refuses writes (OOM), "+
			"so it grants no lock and mints no token; raise maxmemory (fenced keys expire a retention after "+
			"their name's last lock)", bytesOf(used), bytesOf(m.Max))
	case used >= m.Max:
		add(i, "memory", statusFail, "at maxmemory: %s used of %s, and policy %s evicts keys, held locks included",
			bytesOf(used), bytesOf(m.Max), m.Policy)
	case float64(used) >= memoryWarn*float64(m.Max):
		add(i, "memory", statusWarn, "%s used of maxmemory %s (%.1f%%): little headroom; when full, the node refuses "+
			"writes and grants no lock", bytesOf(used), bytesOf(m.Max), 100*float64(used)/float64(m.Max))
	default:
		add(i, "memory", statusOK, "%s used of maxmemory %s (%.0f%%)", bytesOf(used), bytesOf(m.Max),
			100*float64(used)/float64(m.Max))
	}
}

func judgeFencedKeys(i int, f nodeFacts, scanTime time.Duration, add func(int, string, status, string, ...any)) {
	ff := f.Fencing
	switch {
	case ff == nil:
	case ff.WrongType > 0:
		add(i, "fenced keys", statusFail, "%d of the fencing keys hold another type than a string: %s. Locks whose "+
			"keys these are fail (ErrWrongType), and a node-wide key stops every fenced lock on the node; another "+
			"application writes under the clients' key prefix (--key-prefix), or the keys were written by hand: "+
			"delete them or give one of the two another prefix", ff.WrongType, strings.Join(ff.WrongTypeExample, ", "))
	case ff.Error != "" && ff.DBSize == 0:
		add(i, "fenced keys", statusWarn, "cannot read the fencing keys: %s", ff.Error)
	case ff.Error != "":
		add(i, "fenced keys", statusWarn, "at least %d fenced names of %d keys; the count stopped: %s", ff.FencedKeys, ff.DBSize, ff.Error)
	case !ff.ScanComplete:
		add(i, "fenced keys", statusOK, "at least %d fenced names of %d keys (counted for %v with SCAN, then stopped; "+
			"--scan-time counts longer)", ff.FencedKeys, ff.DBSize, scanTime)
	default:
		add(i, "fenced keys", statusOK, "%d fenced names of %d keys (one key per name locked within the retention, "+
			"about %s)", ff.FencedKeys, ff.DBSize, bytesOf(ff.FencedKeys*bytesPerFencedKey))
	}
}

// bytesPerFencedKey is what one name's fence:high key costs a node, its
// expiry included (docs/operations.md, the capacity rule).
const bytesPerFencedKey = 160

func bytesOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
