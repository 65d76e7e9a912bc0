package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

func rwMutex(t *testing.T, c *redlock.Client, name string) *redlock.RWMutex {
	t.Helper()
	m, err := c.RWMutex(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Many readers or one writer, fenced and not: readers share, a writer
// excludes readers and writers, and tokens order every conflicting pair.
func TestRWManyReadersOrOneWriter(t *testing.T) {
	cl := startCluster(t, 3)
	for _, fenced := range []bool{true, false} {
		var opts []redlock.Option
		if !fenced {
			opts = append(opts, redlock.WithoutFencing())
		}
		c := cl.newClient(t, opts...)
		ctx := context.Background()
		m := rwMutex(t, c, "doc")
		r1, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatalf("fenced=%v: first reader: %v", fenced, err)
		}
		r2, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatalf("fenced=%v: second reader: %v", fenced, err)
		}
		if !r1.Reading() || !r2.Reading() {
			t.Error("a read hold does not say it reads")
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, redlock.ErrLocked) {
			t.Fatalf("fenced=%v: a writer while two read: %v, want ErrLocked", fenced, err)
		}
		if err := r1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, redlock.ErrLocked) {
			t.Fatalf("fenced=%v: a writer while one reads: %v, want ErrLocked", fenced, err)
		}
		if err := r2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := m.TryLock(ctx)
		if err != nil {
			t.Fatalf("fenced=%v: a writer once the readers left: %v", fenced, err)
		}
		if w.Reading() {
			t.Error("a write hold says it reads")
		}
		if _, err := m.TryRLock(ctx); !errors.Is(err, redlock.ErrLocked) {
			t.Fatalf("fenced=%v: a reader while a writer holds: %v, want ErrLocked", fenced, err)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, redlock.ErrLocked) {
			t.Fatalf("fenced=%v: a second writer: %v, want ErrLocked", fenced, err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r3, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatalf("fenced=%v: a reader after the writer: %v", fenced, err)
		}
		if fenced && !(w.Token() > r1.Token() && w.Token() > r2.Token() && r3.Token() > w.Token()) {
			t.Errorf("tokens: readers %d, %d, then writer %d, then reader %d: a conflicting pair out of order",
				r1.Token(), r2.Token(), w.Token(), r3.Token())
		}
		_ = r3.Unlock(ctx)
		// A mutex of the same name is another lock.
		l, err := c.TryLock(ctx, "doc")
		if err != nil {
			t.Fatalf("fenced=%v: the mutex of the same name: %v", fenced, err)
		}
		_ = l.Unlock(ctx)
	}
}

// Writers are not starved: a writer waiting for readers blocks new
// readers, and gets the lock when the readers it waited for leave. With
// the rule removed (a reader script that ignores queued writers) the same
// replay lets a new reader in ahead of the writer.
func TestRWWaitingWriterBlocksNewReaders(t *testing.T) {
	cl := startCluster(t, 3)
	for _, ruleGone := range []bool{false, true} {
		var hooks map[int]redis.Hook
		if ruleGone {
			hooks = map[int]redis.Hook{}
			for i := range cl.clients {
				hooks[i] = replaceScript{name: "rw-read", source: readerIgnoringTheQueue(t)}
			}
		}
		c := cl.hookedOn(t, hooks, redlock.WithRetryDelay(time.Millisecond, 5*time.Millisecond))
		ctx := context.Background()
		name := "starve"
		if ruleGone {
			name = "starve-naive"
		}
		m := rwMutex(t, c, name)
		r1, err := m.TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := writeInBackground(t, m, fmt.Sprintf("ruleGone=%v: the writer", ruleGone))
		// The writer is refused by the reader, and so queued, within a few attempts.
		var r2err error
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			var r2 *redlock.RWLock
			if r2, r2err = m.TryRLock(ctx); r2err == nil {
				_ = r2.Unlock(ctx)
				if ruleGone {
					break
				}
				continue
			}
			if !ruleGone {
				break
			}
		}
		switch {
		case !ruleGone && !errors.Is(r2err, redlock.ErrLocked):
			t.Errorf("a new reader while a writer waits: %v, want ErrLocked", r2err)
		case ruleGone && r2err != nil:
			t.Errorf("rule removed: a new reader while a writer waits: %v, want it let in (the trap)", r2err)
		}
		if err := r1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if w := <-got; w != nil {
			_ = w.Unlock(ctx)
		}
	}
}

// writeInBackground takes m's write hold in the background, waiting up to
// 10 s, and delivers it (nil, after an error named what, if it failed).
func writeInBackground(t *testing.T, m *redlock.RWMutex, what string) <-chan *redlock.RWLock {
	got := make(chan *redlock.RWLock, 1)
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w, err := m.Lock(wctx)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		got <- w
	}()
	return got
}

// readerIgnoringTheQueue is the fenced reader script without its rule
// that a live queued writer refuses new readers.
func readerIgnoringTheQueue(t *testing.T) string {
	src := nodescript.FencedRWRead.Source()
	rule := "if writerQueued() then\n"
	if !strings.Contains(src, rule) {
		t.Fatal("the reader script no longer has the queue rule the replay removes")
	}
	return strings.Replace(src, rule, "if false then\n", 1)
}

// replaceScript sends source (EVAL) in place of the library script called
// name, with the same keys and arguments.
type replaceScript struct{ name, source string }

func (h replaceScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h replaceScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h replaceScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) != h.name {
			return next(ctx, cmd)
		}
		one := redis.NewCmd(ctx, append([]any{"eval", h.source}, cmd.Args()[2:]...)...)
		err := next(ctx, one)
		cmd.(*redis.Cmd).SetVal(one.Val())
		cmd.SetErr(one.Err())
		return err
	}
}

// Every reader has its own entry and expiry: a crashed reader leaves by
// its own expiry while a live reader keeps extending, so a writer gets the
// lock as soon as the live one leaves. With one expiry for the whole set
// (the rule removed: the extension renews every entry, as a shared TTL
// does), the crashed reader stays a zombie and the writer is refused.
func TestRWCrashedReaderLeavesByItsOwnExpiry(t *testing.T) {
	cl := startCluster(t, 3)
	for _, ruleGone := range []bool{false, true} {
		name := "zombie"
		var hooks map[int]redis.Hook
		if ruleGone {
			name = "zombie-naive"
			hooks = map[int]redis.Hook{}
			for i := range cl.clients {
				hooks[i] = replaceScript{name: "rw-extend", source: extendEveryReader}
			}
		}
		crashed := cl.newClient(t, redlock.WithTTL(300*time.Millisecond))
		live := cl.hookedOn(t, hooks, redlock.WithTTL(300*time.Millisecond))
		writer := cl.newClient(t)
		ctx := context.Background()
		if _, err := rwMutex(t, crashed, name).TryRLock(ctx); err != nil {
			t.Fatal(err)
		}
		crashed.Close() // never unlocks
		r, err := rwMutex(t, live, name).TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range 8 { // 800 ms of extensions: past the crashed reader's TTL
			time.Sleep(100 * time.Millisecond)
			if err := r.Extend(ctx); err != nil {
				t.Fatalf("ruleGone=%v: the live reader's Extend: %v", ruleGone, err)
			}
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := rwMutex(t, writer, name).TryLock(ctx)
		switch {
		case !ruleGone && err != nil:
			t.Errorf("a writer once the live reader left: %v, want the lock (the crashed reader expired)", err)
		case ruleGone && !errors.Is(err, redlock.ErrLocked):
			t.Errorf("rule removed: a writer after the live reader left: %v, want ErrLocked (a zombie reader)", err)
		}
		if w != nil {
			_ = w.Unlock(ctx)
		}
	}
}

// extendEveryReader is the readers' extension with one expiry for the
// whole set: every entry is renewed, not just the caller's.
const extendEveryReader = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = 0
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), m)
  end
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  held = 1
end
if ARGV[3] ~= '1' then return held end
return {held, tonumber(redis.call('GET', KEYS[3]) or '-1')}`

// Downgrade keeps the token and lets no writer in between: a queued writer
// still waits, now for the reader the writer became. The rule removed
// (Unlock, then RLock: Curator's race) hands the lock to the queued writer
// in between.
func TestRWDowngradeLetsNoWriterInBetween(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithRetryDelay(time.Millisecond, 5*time.Millisecond))
	ctx := context.Background()
	for _, ruleGone := range []bool{false, true} {
		m := rwMutex(t, c, "down")
		w, err := m.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		token := w.Token()
		var mu sync.Mutex
		var other *redlock.RWLock
		queued := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			close(queued)
			l, err := m.Lock(wctx)
			if err == nil {
				mu.Lock()
				other = l
				mu.Unlock()
			}
		}()
		<-queued
		time.Sleep(100 * time.Millisecond) // the other writer is refused, and queued
		var mine *redlock.RWLock
		if ruleGone {
			if err := w.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the queued writer is promised the lock, and takes it
			mine, _ = m.TryRLock(ctx)
		} else {
			if err := w.Downgrade(ctx); err != nil {
				t.Fatalf("Downgrade: %v", err)
			}
			mine = w
			if !w.Reading() || w.Token() != token {
				t.Errorf("after Downgrade: reading %v, token %d (was %d)", w.Reading(), w.Token(), token)
			}
		}
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		took := other != nil
		mu.Unlock()
		switch {
		case !ruleGone && (took || mine == nil):
			t.Errorf("after Downgrade the queued writer took the lock (%v), or the downgraded hold is gone", took)
		case ruleGone && !took:
			t.Errorf("rule removed (Unlock, RLock): the queued writer did not get in between; the replay did not force the race")
		}
		if mine != nil {
			_ = mine.Unlock(ctx)
		}
		<-done
		if other != nil {
			_ = other.Unlock(ctx)
		}
	}
}

// Upgrade is refused with a typed error, at once: two readers that each
// asked for the write hold through their own read hold's context would
// wait for each other until their contexts ended (the rule removed: a
// context that does not carry the read hold).
func TestRWUpgradeIsRefused(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	m := rwMutex(t, c, "up")
	r1, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Upgrade(ctx); !errors.Is(err, redlock.ErrUpgrade) {
		t.Errorf("Upgrade: %v, want ErrUpgrade", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i, r := range []*redlock.RWLock{r1, r2} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(r.Context(ctx), 300*time.Millisecond)
			defer cancel()
			_, errs[i] = m.Lock(wctx)
		}()
		go func() { // the rule removed: the context does not say it reads
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, errs[2+i] = m.Lock(wctx)
		}()
	}
	wg.Wait()
	for i := range 2 {
		if !errors.Is(errs[i], redlock.ErrUpgrade) || errors.Is(errs[i], context.DeadlineExceeded) {
			t.Errorf("reader %d's write hold through its context: %v, want ErrUpgrade at once", i, errs[i])
		}
		if !errors.Is(errs[2+i], context.DeadlineExceeded) {
			t.Errorf("rule removed, reader %d: %v, want the deadlock cut by the deadline", i, errs[2+i])
		}
	}
	if _, err := m.RLock(r1.Context(ctx)); !errors.Is(err, redlock.ErrHeldByContext) {
		t.Errorf("RLock through a read hold's context without Reentrant: %v, want ErrHeldByContext", err)
	}
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
}

// A reader's reentry does not queue again behind a waiting writer (Go's
// RWMutex trap, golang/go#35138): with Reentrant it shares the hold at once.
func TestRWReadReentryDoesNotQueueBehindAWriter(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithRetryDelay(time.Millisecond, 5*time.Millisecond))
	ctx := context.Background()
	m := rwMutex(t, c, "reread")
	r, err := m.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wdone := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		w, err := m.Lock(wctx)
		if err == nil {
			err = w.Unlock(ctx)
		}
		wdone <- err
	}()
	time.Sleep(100 * time.Millisecond) // the writer waits, queued
	rctx, cancel := context.WithTimeout(r.Context(ctx), time.Second)
	defer cancel()
	inner, err := m.RLock(rctx, redlock.Reentrant())
	if err != nil {
		t.Fatalf("a reader's reentry while a writer waits: %v", err)
	}
	if inner.Token() != r.Token() {
		t.Errorf("the reentry's token %d, the hold's %d", inner.Token(), r.Token())
	}
	_ = inner.Unlock(ctx)
	if _, err := m.TryLock(ctx); !errors.Is(err, redlock.ErrLocked) {
		t.Errorf("after the inner Unlock the read hold is gone: %v", err)
	}
	_ = r.Unlock(ctx)
	if err := <-wdone; err != nil {
		t.Errorf("the writer after the reader left: %v", err)
	}
}

// A paused writer's delayed write lands after a later reader read: the
// fence's read mark refuses it (ReadFence). Without the read mark (the
// read not fenced, so only the write mark is kept) the stale write is
// admitted.
func TestRWFenceRefusesAWriteDelayedPastAReader(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(300*time.Millisecond))
	ctx := context.Background()
	m := rwMutex(t, c, "stale")
	w, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-w.Done() // the writer is paused past its lease
	r, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	if r.Token() <= w.Token() {
		t.Fatalf("the later reader's token %d is not above the writer's %d", r.Token(), w.Token())
	}
	for _, readMark := range []bool{true, false} {
		f := &fence.Memory{}
		if readMark {
			if err := f.AdmitRead(ctx, "doc", r.Token(), "reader"); err != nil {
				t.Fatal(err)
			}
		}
		err := f.Admit(ctx, "doc", w.Token(), "writer")
		switch {
		case readMark && !errors.Is(err, fence.ErrStale):
			t.Errorf("the delayed write after a fenced read: %v, want ErrStale", err)
		case !readMark && err != nil:
			t.Errorf("without the read mark the stale write is admitted (the trap), got %v", err)
		}
	}
}
