package waitmodel

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// The RW model against the scripts it models: for every reachable state of
// the phase-fair model with up to three writers and three readers (the last
// of each a TryLock or TryRLock caller, or not), and every
// event there, the node is set to that state (the writer's key, NEXT, the
// queue, the readers, RPHASE and the readers' wait, everyone live) and
// runs the real script (rw_read.lua; rw_write_block.lua with acquire.lua;
// rw_release.lua as Unlock); the keys read back must be the model's next
// state. Each rule removed from the model makes it differ from the
// scripts somewhere, so the comparison is not vacuous.
func TestTheRWModelIsTheRWScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := node.StartProcess(ctx, node.Config{Name: "waitmodel-rw", BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rc := p.NewClient()
	defer rc.Close()
	runs := 0
	cfgs := []RWConfig{{Writers: 2, Readers: 2}, {Writers: 3, Readers: 3}, {Writers: 3, Readers: 3, TryWriter: true, TryReader: true}}
	if RaceOn {
		cfgs = cfgs[:1] // a tenth of the runs: make test runs them all without -race
	}
	for k, cfg := range append(cfgs, RWConfig{Writers: 2, Readers: 2}) {
		// The last again with what the scripts leave beside the rule's
		// keys: watch.lua's mark in the queue, and an RPHASE left from
		// an earlier wait.
		marked = k == len(cfgs)
		n, diff, err := compareRW(ctx, rc, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		if diff != "" {
			t.Fatal(diff)
		}
		runs += n
	}
	t.Logf("%d script runs, the scripts and the model agree", runs)
	marked = false
	for _, rules := range []RWRules{ReaderIgnoresQueue, WriterIgnoresAdmitted, UnlockPromisesWriter, NoNextPhase, PromiseLast} {
		n, diff, err := compareRW(ctx, rc, RWConfig{Writers: 2, Readers: 2, Rules: rules}, true)
		if err != nil {
			t.Fatal(err)
		}
		if diff == "" {
			t.Errorf("%v: the model with the rule removed agrees with the scripts in all %d runs", rules, n)
		}
		t.Logf("%v differs after %d runs: %s", rules, n, diff)
	}
}

// compareRW runs every event of every reachable state of cfg on the node
// and compares; it returns how many it ran and the first difference.
// Explored from the scripts' rule (the broken rule's model only says what
// each event does), so that every state compared is one the node can reach.
func compareRW(ctx context.Context, rc *redis.Client, cfg RWConfig, stopAtFirst bool) (int, string, error) {
	reach := cfg
	reach.Rules = PhaseFair
	seen := map[rwState]bool{reach.initial(): true}
	queue := []rwState{reach.initial()}
	runs := 0
	ran := map[rwState]bool{} // the node's keys only: the ghosts are the checker's
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		reach.step(s, func(_ RWEvent, t rwState) {
			if !seen[t] {
				seen[t] = true
				queue = append(queue, t)
			}
		})
		if k := keysOf(s); ran[k] {
			continue
		} else {
			ran[k] = true
		}
		var diff string
		var err error
		cfg.step(s, func(e RWEvent, want rwState) {
			if err != nil || diff != "" && stopAtFirst {
				return
			}
			var got rwState
			got, err = runRW(ctx, rc, &cfg, s, e)
			runs++
			if err == nil && !sameKeys(&cfg, got, want) && diff == "" {
				diff = fmt.Sprintf("%v, %v in state %s:\nthe scripts: %s\nthe model:   %s", cfg.Rules, e,
					cfg.describe(s), cfg.describe(got), cfg.describe(want))
			}
		})
		if err != nil || diff != "" {
			return runs, diff, err
		}
	}
	return runs, "", nil
}

// keysOf is s without its ghosts: what the node holds.
func keysOf(s rwState) rwState {
	s.ghost, s.phases, s.holds, s.ahead = [MaxReaders]rGhost{}, [MaxWriters]int8{}, [MaxWriters]int8{}, [MaxWriters]int8{}
	return s
}

// sameKeys compares what the node keeps (no ghosts).
func sameKeys(c *RWConfig, a, b rwState) bool {
	if a.holder != b.holder || a.next != b.next {
		return false
	}
	for w := range c.Writers {
		if a.place[w] != b.place[w] {
			return false
		}
	}
	for r := range c.Readers {
		if a.reading[r] != b.reading[r] || a.due[r] != b.due[r] {
			return false
		}
	}
	return true
}

const rwBase = "{rw}"

var (
	rwNext, rwQueue, rwSeen, rwReaders, rwH = rwBase + ":next", rwBase + ":queue", rwBase + ":seen", rwBase + ":readers", rwBase + ":fence"
	rwPhase, rwWait, rwWaitSeen             = rwBase + ":rphase", rwBase + ":rwait", rwBase + ":rwait:seen"
)

func rwValue(reader bool, i int) string {
	if reader {
		return fmt.Sprintf("r%d", i)
	}
	return fmt.Sprintf("w%d", i)
}

func rwWaiter(reader bool, i int) string { return "c" + rwValue(reader, i) + "/1" }

// marked: runRW also sets watch.lua's mark and a leftover RPHASE.
var marked bool

// runRW sets the node to s, runs e's script and reads the keys back.
func runRW(ctx context.Context, rc *redis.Client, c *RWConfig, s rwState, e RWEvent) (rwState, error) {
	if err := rc.FlushAll(ctx).Err(); err != nil {
		return rwState{}, err
	}
	const phase = 10
	now := time.Now()
	live := float64(now.Add(time.Hour).UnixMilli())
	base := now.Add(-time.Hour).UnixMicro()
	pipe := rc.Pipeline()
	if s.holder >= 0 {
		pipe.Set(ctx, rwBase, rwValue(false, int(s.holder)), time.Hour)
	}
	if s.next >= 0 {
		pipe.Set(ctx, rwNext, rwWaiter(false, int(s.next)), time.Hour)
	}
	for w := range c.Writers {
		if s.place[w] >= 0 {
			pipe.ZAdd(ctx, rwQueue, redis.Z{Score: float64(base + int64(s.place[w])), Member: rwWaiter(false, w)})
			pipe.ZAdd(ctx, rwSeen, redis.Z{Score: live, Member: rwWaiter(false, w)})
		}
	}
	for r := range c.Readers {
		if s.reading[r] {
			pipe.ZAdd(ctx, rwReaders, redis.Z{Score: live, Member: rwValue(true, r)})
		}
		if s.due[r] != notWaiting {
			pipe.Set(ctx, rwPhase, phase, time.Hour)
			pipe.ZAdd(ctx, rwWait, redis.Z{Score: float64(phase + int(s.due[r])), Member: rwWaiter(true, r)})
			pipe.ZAdd(ctx, rwWaitSeen, redis.Z{Score: live, Member: rwWaiter(true, r)})
		}
	}
	if marked {
		pipe.ZAdd(ctx, rwQueue, redis.Z{Score: math.Inf(1), Member: "~"})
		pipe.ZAdd(ctx, rwSeen, redis.Z{Score: live, Member: "~life"})
		pipe.SetNX(ctx, rwPhase, phase, time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return rwState{}, err
	}
	const hour = 3_600_000
	value, waiter := rwValue(e.Reader, e.Actor), rwWaiter(e.Reader, e.Actor)
	if c.tries(e.Reader, e.Actor) {
		waiter = "" // TryLock, TryRLock
	}
	marker := rwBase + ":released:" + value
	var call *nodescript.Call
	switch {
	case e.Kind == RWAttempt && e.Reader:
		call = nodescript.NewCall(nodescript.RWRead, []any{rwBase, marker, rwNext, rwQueue, rwSeen, rwReaders, rwH,
			rwPhase, rwWait, rwWaitSeen}, value, hour, "", hour, waiter)
	case e.Kind == RWAttempt:
		call = nodescript.NewCall(nodescript.RWWrite, []any{rwBase, marker, rwNext, rwQueue, rwSeen, rwReaders,
			rwPhase, rwWait, rwWaitSeen}, value, hour, waiter, hour, 0)
	default:
		writer := 1
		if e.Reader {
			writer = 0
		}
		call = nodescript.NewCall(nodescript.RWRelease, []any{rwBase, marker, rwNext, rwQueue, rwSeen, rwReaders,
			rwPhase, rwWait, rwWaitSeen}, value, 0, 1, waiter, hour, writer)
	}
	if err := call.Run(ctx, rc).Err(); err != nil {
		return rwState{}, fmt.Errorf("%v: %w", e, err)
	}
	return readRW(ctx, rc, c)
}

// readRW reads the node's keys back as a state (no ghosts).
func readRW(ctx context.Context, rc *redis.Client, c *RWConfig) (rwState, error) {
	got := c.initial()
	holder, _ := rc.Get(ctx, rwBase).Result()
	next, _ := rc.Get(ctx, rwNext).Result()
	queue, err := rc.ZRange(ctx, rwQueue, 0, -1).Result()
	if err != nil {
		return got, err
	}
	queue = slices.DeleteFunc(queue, func(m string) bool { return m == "~" }) // watch.lua's mark
	readers, err := rc.ZRange(ctx, rwReaders, 0, -1).Result()
	if err != nil {
		return got, err
	}
	wait, err := rc.ZRangeWithScores(ctx, rwWait, 0, -1).Result()
	if err != nil {
		return got, err
	}
	phase, _ := rc.Get(ctx, rwPhase).Int()
	for w := range c.Writers {
		if holder == rwValue(false, w) {
			got.holder = int8(w)
		}
		if next == rwWaiter(false, w) {
			got.next = int8(w)
		}
		got.place[w] = int8(slices.Index(queue, rwWaiter(false, w)))
	}
	for r := range c.Readers {
		got.reading[r] = slices.Contains(readers, rwValue(true, r))
		for _, z := range wait {
			if z.Member == rwWaiter(true, r) {
				got.due[r] = int8(max(int(z.Score)-phase, -1))
			}
		}
	}
	return got, nil
}
