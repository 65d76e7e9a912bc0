package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// The read-write lock is phase-fair (docs/rwlock.md, Fairness): a reader
// refused during a writer phase is admitted when that phase ends, ahead of
// the writers still queued; a writer waits for the writers ahead of it and
// one reader phase more than there are of them at most.
// Issue 34 found readers starved: 3 writers taking turns, one reader
// looping RLock with 1 s deadlines for 4 s: 461 writes, 0 reads.

// rwWaitingReaders is how many readers wait from any phase on node c.
func rwWaitingReaders(t *testing.T, c redis.UniversalClient, name string) int64 {
	t.Helper()
	n, err := c.ZCard(context.Background(), "redlock:{"+name+"}:rw:rwait").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rwQueuedWriters is how many writers wait in node c's queue.
func rwQueuedWriters(t *testing.T, c redis.UniversalClient, name string) int64 {
	t.Helper()
	n, err := c.ZCard(context.Background(), "redlock:{"+name+"}:rw:queue").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitOnEvery polls until ok holds on every node, or fails the test after 5 s.
func waitOnEvery(t *testing.T, cl *cluster, what string, ok func(c redis.UniversalClient) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		all := true
		for _, c := range cl.inspect {
			all = all && ok(c)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 5 s: %s", what)
		}
	}
}

type rwResult struct {
	l   *redlock.RWLock
	err error
	at  time.Time
}

func rwInBackground(ctx context.Context, m *redlock.RWMutex, reader bool) <-chan rwResult {
	got := make(chan rwResult, 1)
	go func() {
		take := m.Lock
		if reader {
			take = m.RLock
		}
		l, err := take(ctx)
		got <- rwResult{l, err, time.Now()}
	}()
	return got
}

// A reader refused while a writer holds the lock is admitted when that
// writer unlocks, before the writer that queued behind it. With the rule
// removed (a reader script that lets no waiting reader past a queued
// writer, as before issue 34), the queued writer goes first: the reader
// waits one writer phase more, and under a stream of writers, for ever.
func TestRWReaderWaitsForOneWriterPhaseAtMost(t *testing.T) {
	cl := startCluster(t, 3)
	for _, ruleGone := range []bool{false, true} {
		t.Run(fmt.Sprintf("ruleGone=%v", ruleGone), func(t *testing.T) {
			var hooks map[int]redis.Hook
			if ruleGone {
				hooks = map[int]redis.Hook{}
				for i := range cl.clients {
					hooks[i] = replaceScript{name: "rw-read", source: readerWithoutPhases(t)}
				}
			}
			// A node timeout of 500 ms keeps the queued writer live (SEEN)
			// for about a second between its retries: with the rule gone,
			// only a live queued writer refuses the reader, and a writer
			// whose retry a busy machine delayed past the default liveness
			// (about 120 ms) let the reader in first (1 run in 20 on the
			// code before the calls rode their batches, and in CI).
			c := cl.hookedOn(t, hooks, redlock.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond),
				redlock.WithNodeTimeout(500*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			name := fmt.Sprintf("phase-%v", ruleGone)
			m := rwMutex(t, c, name)
			w1, err := m.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			reader := rwInBackground(ctx, m, true)
			if ruleGone {
				time.Sleep(100 * time.Millisecond) // it registers nowhere: give it time to be refused
			} else {
				waitOnEvery(t, cl, "the reader waits", func(n redis.UniversalClient) bool { return rwWaitingReaders(t, n, name) == 1 })
			}
			writer := rwInBackground(ctx, m, false)
			waitOnEvery(t, cl, "the second writer queues", func(n redis.UniversalClient) bool { return rwQueuedWriters(t, n, name) >= 1 })
			if err := w1.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			var first string
			var r, w rwResult
			select {
			case r = <-reader:
				first = "reader"
			case w = <-writer:
				first = "writer"
			}
			switch {
			case !ruleGone && first != "reader":
				t.Fatalf("the writer queued behind a waiting reader went first (%v)", w.err)
			case ruleGone && first != "writer":
				t.Fatalf("rule removed: the reader went first (%v): the replay no longer shows the trap", r.err)
			}
			if first == "reader" {
				if r.err != nil {
					t.Fatalf("reader: %v", r.err)
				}
				// The writer waits for the reader phase, then gets the lock.
				select {
				case w = <-writer:
					t.Fatalf("the writer got in during the reader phase: %v", w.err)
				case <-time.After(100 * time.Millisecond):
				}
				if err := r.l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if w = <-writer; w.err != nil {
					t.Fatalf("the writer after the reader phase: %v", w.err)
				}
				if w.l.Token() <= r.l.Token() {
					t.Errorf("writer's token %d not above the reader's %d", w.l.Token(), r.l.Token())
				}
				_ = w.l.Unlock(ctx)
				return
			}
			if w.err != nil {
				t.Fatalf("writer: %v", w.err)
			}
			_ = w.l.Unlock(ctx)
			if r = <-reader; r.err == nil {
				_ = r.l.Unlock(ctx)
			}
		})
	}
}

// readerWithoutPhases is the fenced reader script without the phase rule:
// a live queued writer refuses every reader, and a refused reader waits
// in no phase.
func readerWithoutPhases(t *testing.T) string {
	src := nodescript.FencedRWRead.Source()
	for _, rule := range []string{"  if not admitted(WAITER) then return refused(now, false) end\n", "  waitRead(WAITER, now or phaseNow(), ARGV[4], held)\n"} {
		if !strings.Contains(src, rule) {
			t.Fatalf("the reader script no longer has the phase rule the replay removes (%q)", rule)
		}
		src = strings.Replace(src, rule, "", 1)
	}
	// Every live queued writer refuses the reader, admitted or not.
	return strings.Replace(src, "  if clash then return wrongType(clash) end\nend\n",
		"  if clash then return wrongType(clash) end\n  return refused(now, false)\nend\n", 1)
}

// Readers refused in the same writer phase are all admitted when it ends,
// and a reader that came during the reader phase, while a writer waits,
// is not: it waits for the next one. The writer queued in between gets
// the lock once the admitted readers leave.
func TestRWReaderPhaseAdmitsOnlyTheReadersThatWaitedThroughAWrite(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "phase-batch"
	m := rwMutex(t, c, name)
	w1, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := rwInBackground(ctx, m, true), rwInBackground(ctx, m, true)
	waitOnEvery(t, cl, "two readers wait", func(n redis.UniversalClient) bool { return rwWaitingReaders(t, n, name) == 2 })
	w2 := rwInBackground(ctx, m, false)
	waitOnEvery(t, cl, "a writer queues", func(n redis.UniversalClient) bool { return rwQueuedWriters(t, n, name) >= 1 })
	if err := w1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := <-r1, <-r2
	if a.err != nil || b.err != nil {
		t.Fatalf("readers that waited through the write: %v, %v", a.err, b.err)
	}
	// A reader arriving now, with the writer still queued, is refused.
	if _, err := m.TryRLock(ctx); !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("a new reader during the reader phase with a writer queued: %v, want ErrLocked", err)
	}
	late := rwInBackground(ctx, m, true)
	for _, r := range []rwResult{a, b} {
		if err := r.l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w := <-w2
	if w.err != nil {
		t.Fatalf("the writer after the reader phase: %v", w.err)
	}
	select {
	case r := <-late:
		t.Fatalf("the late reader got in during the write: %v", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := w.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-late
	if r.err != nil {
		t.Fatalf("the late reader, in the next reader phase: %v", r.err)
	}
	if r.l.Token() <= w.l.Token() {
		t.Errorf("late reader's token %d not above the writer's %d", r.l.Token(), w.l.Token())
	}
	_ = r.l.Unlock(ctx)
}

// A reader that gives up leaves the readers' wait on every node, and one
// that dies in it holds back the next writer for its liveness only: the
// writer queued behind it gets the lock.
func TestRWReaderThatGaveUpOrDiedHoldsNoWriterBack(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "phase-gone"
	m := rwMutex(t, c, name)
	w1, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	reader := rwInBackground(rctx, m, true)
	waitOnEvery(t, cl, "the reader waits", func(n redis.UniversalClient) bool { return rwWaitingReaders(t, n, name) == 1 })
	rcancel()
	if r := <-reader; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the reader whose ctx ended: %v", r.err)
	}
	waitOnEvery(t, cl, "the reader left", func(n redis.UniversalClient) bool { return rwWaitingReaders(t, n, name) == 0 })

	// A reader that died waiting, as its refusal left it on every node:
	// needing the hold in progress to end, live for 3 s more.
	key := "redlock:{" + name + "}:rw"
	for i, n := range cl.inspect {
		until := float64(time.Now().Add(3 * time.Second).UnixMilli())
		if err := n.ZAdd(ctx, key+":rwait", redis.Z{Member: "dead/1", Score: 0}).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		n.ZAdd(ctx, key+":rwait:seen", redis.Z{Member: "dead/1", Score: until})
		n.Set(ctx, key+":rphase", 0, 10*time.Second)
		n.PExpire(ctx, key+":rwait", 10*time.Second)
		n.PExpire(ctx, key+":rwait:seen", 10*time.Second)
	}
	w2 := rwInBackground(ctx, m, false)
	waitOnEvery(t, cl, "a writer queues", func(n redis.UniversalClient) bool { return rwQueuedWriters(t, n, name) >= 1 })
	if err := w1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The Unlock ended the hold the dead reader waited for: no writer is
	// promised the lock, and none granted it while the reader counts as live.
	select {
	case w := <-w2:
		t.Fatalf("a writer got in during the dead reader's phase: %v", w.err)
	case <-time.After(300 * time.Millisecond):
	}
	w := <-w2
	if w.err != nil {
		t.Fatalf("the writer behind a dead reader: %v", w.err)
	}
	_ = w.l.Unlock(ctx)
}

// A writer's Unlock that reaches only some nodes, its hold expiring on the
// others, and one node down: the reader that waited for that hold must be
// admitted on the nodes where the hold expired too. Counting the phase at
// Unlock only (this rule's first version) admitted it where the Unlock
// landed and refused it where the hold expired, while the queued writer
// was refused where the reader was admitted: 2 and 2 of 5 with one down,
// neither could get a majority for as long as the node stayed down.
func TestRWReaderAdmittedWhereTheHoldItWaitedForExpired(t *testing.T) {
	cl := startCluster(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "phase-expired"
	fast := redlock.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond)
	// The first writer's Unlock reaches nodes 0 and 1 only; its hold (1 s)
	// expires on 2, 3 and 4.
	h := cutScript("rw-release")
	w1c := cl.actor(t, []*faultHook{nil, nil, h, h, h}, fast, redlock.WithTTL(time.Second))
	// Everyone else has lost node 2.
	others := cl.actor(t, []*faultHook{nil, nil, cut(), nil, nil}, fast)
	w1, err := rwMutex(t, w1c, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := rwMutex(t, others, name)
	reader := rwInBackground(ctx, m, true)
	waitOnEvery(t, cl, "the reader waits", func(n redis.UniversalClient) bool {
		return n == cl.inspect[2] || rwWaitingReaders(t, n, name) == 1
	})
	writer := rwInBackground(ctx, m, false)
	waitOnEvery(t, cl, "the second writer queues", func(n redis.UniversalClient) bool {
		return n == cl.inspect[2] || rwQueuedWriters(t, n, name) >= 1
	})
	_ = w1.Unlock(ctx) // lands on 0 and 1 only
	readerThenWriter(t, ctx, reader, writer)
}

// writeGrants counts the write acquisitions a node granted, as its client
// saw them.
type writeGrants struct{ n atomic.Int64 }

func (g *writeGrants) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *writeGrants) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *writeGrants) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.Cmd); ok && err == nil && redlock.ScriptName(cmd.Args()) == "rw-write" {
			if v, ok := c.Val().([]any); ok && len(v) > 0 && v[0] == int64(1) {
				g.n.Add(1)
			}
		}
		return err
	}
}

// A reader admitted on a node (the hold it waited for ended there) but not
// yet on a majority is granted there at each attempt, and rolled back. It
// must stay live in the wait meanwhile: it renewed its liveness only when
// refused, so after one liveness period the queued writer's next attempt
// dropped it there and was granted, and the reader, now waiting for the
// next hold, could lose the node to the writer for good. Make test-compat
// caught it as TestRWReaderAdmittedWhereTheHoldItWaitedForExpired's writer
// getting in first (about 1 run in 20). Here the reader is admitted on node
// 0 for 3 s while the first writer's hold lives on node 1 (node 2 is cut),
// with a liveness of about 0.5 s: before the fix the writer was granted on
// node 0 within that time.
func TestRWAdmittedReaderStaysLiveWhereItIsGranted(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "admitted-live"
	// Liveness: the longest retry delay plus two node timeouts, 0.52 s.
	opts := []redlock.Option{redlock.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond),
		redlock.WithNodeTimeout(250 * time.Millisecond)}
	h := cutScript("rw-release")
	w1c := cl.actor(t, []*faultHook{nil, h, h}, append(opts, redlock.WithTTL(4*time.Second))...)
	w1, err := rwMutex(t, w1c, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(4 * time.Second)
	readers := cl.actor(t, []*faultHook{nil, nil, cut()}, opts...)
	grants := &writeGrants{}
	writers := cl.hookedOn(t, map[int]redis.Hook{0: grants, 2: cut()}, opts...)
	reader := rwInBackground(ctx, rwMutex(t, readers, name), true)
	waitOnEvery(t, cl, "the reader waits", func(n redis.UniversalClient) bool {
		return n == cl.inspect[2] || rwWaitingReaders(t, n, name) == 1
	})
	writer := rwInBackground(ctx, rwMutex(t, writers, name), false)
	waitOnEvery(t, cl, "the writer queues", func(n redis.UniversalClient) bool {
		return n == cl.inspect[2] || rwQueuedWriters(t, n, name) >= 1
	})
	_ = w1.Unlock(ctx) // lands on node 0 only
	time.Sleep(time.Until(expires.Add(-500 * time.Millisecond)))
	if n := grants.n.Load(); n != 0 {
		t.Fatalf("node 0 granted the queued writer %d time(s) while the reader admitted there waited", n)
	}
	select {
	case r := <-reader:
		t.Fatalf("the reader got a majority while the first writer held node 1: %v", r.err)
	case w := <-writer:
		t.Fatalf("the writer got a majority while the first writer held node 1: %v", w.err)
	default:
	}
	readerThenWriter(t, ctx, reader, writer) // once the first writer's hold expires on node 1
}

// readerThenWriter checks that the reader gets in first, that the writer
// does not get in during the reader's hold, and that it gets in after the
// reader's Unlock.
func readerThenWriter(t *testing.T, ctx context.Context, reader, writer <-chan rwResult) {
	t.Helper()
	var r rwResult
	select {
	case r = <-reader:
	case w := <-writer:
		t.Fatalf("the writer got in ahead of the reader: %v", w.err)
	}
	if r.err != nil {
		t.Fatalf("the reader: %v", r.err)
	}
	select {
	case w := <-writer:
		t.Fatalf("the writer got in during the reader's hold: %v", w.err)
	default:
	}
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-writer
	if w.err != nil {
		t.Fatalf("the writer after the reader: %v", w.err)
	}
	_ = w.l.Unlock(ctx)
}

// A reader's mark outlives the wait: after the writer's Unlock woke the
// reader and it read and left, '~life' is still live in SEEN. It must
// block no reader (rw_read.lua skips it), never be promised the lock
// (release.lua reads QUEUE, where it never is), keep no key alive without
// an expiry, and a writer queued behind a reader must get the promise
// (not the mark).
// Origin: the adversarial review of the waiting marks (watch.lua, multi_wait.lua).
func TestReadersMarkLifeBlocksNothingAndExpires(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	key := "redlock:{ml}:rw"
	queue, seen, next := key+":queue", key+":queue:seen", key+":next"
	w, err := rwMutex(t, cl.newClient(t), "ml").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hooks, calls := refusals("rw-read")
	rc := cl.hookedOn(t, hooks, redlock.WithRetryDelay(30*time.Second, 30*time.Second))
	read := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		h, err := rwMutex(t, rc, "ml").RLock(rctx)
		if err == nil {
			err = h.Unlock(ctx)
		}
		read <- err
	}()
	waitCount(t, calls, 1)
	time.Sleep(100 * time.Millisecond)
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatalf("reader: %v", err)
	}
	marked := 0
	for _, in := range cl.inspect {
		if s, err := in.ZScore(ctx, seen, "~life").Result(); err == nil && s > float64(time.Now().UnixMilli()) {
			marked++
		}
	}
	if marked == 0 {
		t.Fatal("no node holds a live '~life': the replay does not test it")
	}
	// Readers are not held back by the mark alone.
	r2, err := rwMutex(t, cl.newClient(t), "ml").TryRLock(ctx)
	if err != nil {
		t.Fatalf("a reader with only '~life' in SEEN: %v", err)
	}
	// A writer refused by r2 queues; r2's Unlock promises it the lock.
	wc := cl.newClient(t)
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		h, err := rwMutex(t, wc, "ml").Lock(wctx)
		if err == nil {
			for _, in := range cl.inspect {
				if n, _ := in.Get(ctx, next).Result(); strings.HasPrefix(n, "~") {
					t.Errorf("NEXT is the mark %q", n)
				}
			}
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		k := 0
		for _, in := range cl.inspect {
			if n, _ := in.ZCount(ctx, queue, "-inf", "(+inf").Result(); n >= 1 {
				k++
			}
		}
		if k >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never queued")
		}
	}
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the writer queued behind a reader, with '~life' in SEEN: %v", err)
	}
	// Every key of the queue that remains expires.
	for i, in := range cl.inspect {
		for _, k := range []string{queue, seen, next} {
			if ttl, _ := in.PTTL(ctx, k).Result(); ttl == -1 {
				t.Errorf("node %d: %s has no expiry", i, k)
			}
		}
	}
}

// A writer that gave up (its ctx ended while readers held) leaves the queue
// on every node: the next reader is not refused on its account.
// Origin: the adversarial review of the read-write lock.
func TestRWWriterThatGaveUpDoesNotBlockReaders(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithNodeTimeout(time.Second), redlock.WithRetryDelay(time.Millisecond, 5*time.Millisecond))
	ctx := context.Background()
	m := rwMutex(t, c, "gave-up")
	r1, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Unlock(ctx)
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = m.Lock(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the writer: %v, want its deadline", err)
	}
	// The writer's leave goes out as its Lock returns, and may land a moment
	// later: a reader gets in well within the second, where the writer's
	// queue entry, left alone, would refuse readers for its whole life (2s).
	var r2 *redlock.RWLock
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		if r2, err = m.TryRLock(ctx); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("a reader within a second of the writer giving up: %v (its queue entry lives %v)", err, time.Second*2)
	}
	_ = r2.Unlock(ctx)
}
