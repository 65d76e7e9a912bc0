package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// Adversarial review of the read-write lock: replays on real nodes.

// rwReaders is the readers' sorted set of the read-write lock name.
func rwReaders(name string) string { return "redlock:{" + name + "}:rw:readers" }

// warmDowngrade runs a Downgrade once on every node, so that the nodes have
// the script and a Downgrade sent to a paused node is applied as it resumes
// (an EVALSHA answered NOSCRIPT after the resume would apply nothing).
func warmDowngrade(t *testing.T, c *redlock.Client) {
	t.Helper()
	ctx := context.Background()
	w, err := rwMutex(t, c, "warm").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Downgrade that fails (the nodes that got it did not answer before its
// ctx ended, or its patience: 5 s) leaves the hold a write hold in the client's eyes
// (Reading false, Done open), while the Downgrade lands on the nodes as they
// resume: the writer's keys are now reader entries on a majority, and
// another client's reader is granted while the writer, valid and believing
// it writes, goes on writing.
func TestReviewRWFailedDowngradeLandsLateAndLetsAReaderIntoAWriteHold(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(10*time.Second))
	other := cl.newClient(t)
	ctx := context.Background()
	warmDowngrade(t, c)
	warmDowngrade(t, other) // its node list checked before the pause
	const name = "failed-downgrade"
	w, err := rwMutex(t, c, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 1, 2)
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = w.Downgrade(dctx)
	cancel()
	if err == nil {
		t.Fatal("Downgrade with 2 of 3 nodes paused succeeded; the replay needs it to fail")
	}
	t.Logf("Downgrade: %v; Reading() = %v", err, w.Reading())
	resume()
	// The Downgrades buffered on the paused nodes land as they resume.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := 0
		for _, ic := range cl.inspect {
			if ic.ZCard(ctx, rwReaders(name)).Val() > 0 {
				n++
			}
		}
		if n >= 2 || time.Now().After(deadline) {
			t.Logf("reader entries on %d nodes", n)
			break
		}
	}
	r, err := rwMutex(t, other, name).TryRLock(ctx)
	if err == nil {
		defer r.Unlock(ctx)
		if !w.Reading() && time.Now().Before(w.Until()) && !isDone(w.Done()) {
			t.Errorf("a reader (token %d) was granted while the write hold (token %d, Reading()=false) is valid for %v more: "+
				"the failed Downgrade landed on the nodes", r.Token(), w.Token(), time.Until(w.Until()).Round(time.Millisecond))
		}
	} else if !errors.Is(err, redlock.ErrLocked) {
		t.Fatalf("the reader: %v", err)
	}
	_ = w.Unlock(ctx)
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A Reentrant reentry of a write hold (Do's fn context) may Downgrade: it
// downgrades the outermost hold, under the frame that acquired it and still
// writes. Another client's reader is then granted inside the outer write
// section. (Inner reentries' Unlocks only count down; their Downgrade
// changes the hold for every frame.)
func TestReviewRWInnerReentryDowngradesTheOuterWriteHold(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	other := cl.newClient(t)
	ctx := context.Background()
	m := rwMutex(t, c, "inner-downgrade")
	err := m.Do(ctx, func(fctx context.Context, outer *redlock.RWLock) error {
		inner, err := m.Lock(fctx, redlock.Reentrant())
		if err != nil {
			return err
		}
		if err := inner.Downgrade(fctx); err != nil {
			t.Logf("inner Downgrade: %v", err)
		}
		_ = inner.Unlock(fctx)
		// Back in the outer frame, which took the write hold and writes.
		r, err := rwMutex(t, other, "inner-downgrade").TryRLock(ctx)
		if err == nil {
			t.Errorf("after an inner reentry's Downgrade and Unlock, another reader (token %d) is granted inside the "+
				"outer frame's write section (outer.Reading() = %v)", r.Token(), outer.Reading())
			_ = r.Unlock(ctx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A writer that waited in line and took the lock stays in the queue (and is
// promised the lock) until it unlocks; once it downgrades, its own queue
// entry and promise refuse new readers although no writer holds, waits or
// is promised anything it will take: for a promise's life and the waiter's
// staleness (2 node timeouts + the retry delay).
func TestReviewRWDowngradedWaiterBlocksNewReaders(t *testing.T) {
	cl := startCluster(t, 3)
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithRetryDelay(time.Millisecond, 5*time.Millisecond)}
	c := cl.newClient(t, opts...)
	other := cl.newClient(t, opts...)
	ctx := context.Background()
	const name = "downgraded-waiter"
	m := rwMutex(t, c, name)
	r1, err := rwMutex(t, other, name).TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := writeInBackground(t, m, "the writer")
	time.Sleep(200 * time.Millisecond) // the writer is refused by r1, and queued
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		return
	}
	defer w.Unlock(ctx)
	if err := w.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var refused time.Duration
	for time.Since(start) < 3*time.Second {
		r, err := rwMutex(t, other, name).TryRLock(ctx)
		if err == nil {
			_ = r.Unlock(ctx)
			break
		}
		if !errors.Is(err, redlock.ErrLocked) {
			t.Fatal(err)
		}
		refused = time.Since(start)
		time.Sleep(20 * time.Millisecond)
	}
	if refused > 0 {
		t.Errorf("after the Downgrade of a writer that had waited in line, new readers were refused for %v "+
			"(no writer holds, waits or is promised the lock)", refused.Round(time.Millisecond))
	}
}

// Downgrade does not look at the hold's validity: after Done has closed
// (the write hold's validity ended, the client says so), a Downgrade that
// still finds the keys (they outlive the validity by the drift) returns
// nil, where Extend returns ErrExpired.
func TestReviewRWDowngradeAfterValidityEnded(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(time.Second), redlock.WithDriftFactor(0.3))
	ctx := context.Background()
	w, err := rwMutex(t, c, "late-downgrade").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-w.Done()
	err = w.Downgrade(ctx)
	if err == nil {
		t.Errorf("Downgrade after Done closed: nil (Reading %v), want ErrExpired as Extend gives (%v)",
			w.Reading(), w.Extend(ctx))
	}
}

// rwAttempt is the outcome of a TryLock or TryRLock run in the background.
type rwAttempt struct {
	l   *redlock.RWLock
	err error
}

func rwTryAsync(ctx context.Context, m *redlock.RWMutex, reader bool) <-chan rwAttempt {
	done := make(chan rwAttempt, 1)
	go func() {
		var a rwAttempt
		if reader {
			a.l, a.err = m.TryRLock(ctx)
		} else {
			a.l, a.err = m.TryLock(ctx)
		}
		done <- a
	}()
	return done
}

// withoutRule is script s's source with rule removed (the replay's trap).
func withoutRule(t *testing.T, src, rule string) string {
	t.Helper()
	if !strings.Contains(src, rule) {
		t.Fatal("the script no longer has the rule the replay removes")
	}
	return strings.Replace(src, rule, "", 1)
}

// Counterexample 3 of docs/fencing.md across the two sides, with the exact
// message order: B's round 1 reaches n1 first (its message to n2 is held
// back, n0 cut); A, of the other side, is refused by n1 (B holds there),
// granted on n0 and n2, commits on n0 and n1 (its commit to n2 is lost) and
// unlocks; B's held message reaches n2 and B is granted on n1 and n2 with
// candidates minted before A's commit. B must abort on A's token at n1: a
// writer on HR (A a reader), a reader on H (A a writer). With the rule
// removed from B's commit script, B is granted with a token below the one
// A committed before B's grant (M2, and LO: A's hold had ended).
func TestReviewRWCommitAbortsAcrossSides(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bReads   bool // B is the reader, A the writer
		ruleGone bool
	}{
		{"writer after reader", false, false},
		{"writer after reader, no HR check", false, true},
		{"reader after writer", true, false},
		{"reader after writer, no H check", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startCluster(t, 3)
			cl.withCounter(t, 0, 7)
			opts := []redlock.Option{redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(10 * time.Second)}
			ctx := context.Background()
			bRound1, bCommit, aCommit := "rw-write", "rw-write-commit", "rw-read-commit"
			if tc.bReads {
				bRound1, bCommit, aCommit = "rw-read", "rw-read-commit", "rw-write-commit"
			}
			var replace redis.Hook
			if tc.ruleGone {
				if tc.bReads {
					replace = replaceScript{name: bCommit, source: withoutRule(t, nodescript.RWReadCommit.Source(),
						"if eff > t then return {eff, ID} end\n")}
				} else {
					replace = replaceScript{name: bCommit, source: withoutRule(t, nodescript.RWWriteCommit.Source(),
						"  if hr > tonumber(ARGV[1]) then return {hr, ID} end\n")}
				}
			}
			bReachedN1 := make(chan struct{})
			releaseN2 := make(chan struct{})
			var once sync.Once
			hooks := map[int]redis.Hook{
				0: cut(),
				1: &faultHook{after: func(s string) {
					if s == bRound1 {
						once.Do(func() { close(bReachedN1) })
					}
				}},
				2: &faultHook{before: func(s string) error {
					if s == bRound1 {
						<-releaseN2
					}
					return nil
				}},
			}
			if replace != nil {
				// B's commit goes through the replaced script on n1 and n2.
				hooks[1], hooks[2] = chain{replace, hooks[1]}, chain{replace, hooks[2]}
			}
			b := cl.hookedOn(t, hooks, opts...)
			a := cl.hookedOn(t, map[int]redis.Hook{2: cutScript(aCommit)}, opts...)

			bDone := rwTryAsync(ctx, rwMutex(t, b, "cx3"), tc.bReads)
			<-bReachedN1
			la, err := func() (*redlock.RWLock, error) {
				m := rwMutex(t, a, "cx3")
				if tc.bReads {
					return m.TryLock(ctx)
				}
				return m.TryRLock(ctx)
			}()
			if err != nil {
				close(releaseN2)
				t.Fatalf("A: %v", err)
			}
			if err := la.Unlock(ctx); err != nil {
				close(releaseN2)
				t.Fatalf("A unlock: %v", err)
			}
			close(releaseN2)
			rb := <-bDone
			if rb.err == nil {
				defer rb.l.Unlock(ctx)
				t.Logf("A committed %d and unlocked; B was then granted with %d", la.Token(), rb.l.Token())
			} else {
				t.Logf("A committed %d and unlocked; B: %v", la.Token(), rb.err)
			}
			broken := rb.err == nil && rb.l.Token() <= la.Token()
			if broken != tc.ruleGone {
				t.Fatalf("B granted with a smaller token = %v, want %v (B: %v)", broken, tc.ruleGone, rb.err)
			}
			if !tc.ruleGone && !errors.Is(rb.err, redlock.ErrSuperseded) {
				t.Errorf("B: %v, want ErrSuperseded", rb.err)
			}
		})
	}
}

// chain runs hooks in order (the first outermost).
type chain []redis.Hook

func (c chain) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c chain) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c chain) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	for i := len(c) - 1; i >= 0; i-- {
		next = c[i].ProcessHook(next)
	}
	return next
}

// A writer that gave up (its ctx ended while readers held) leaves the queue
// on every node: the next reader is not refused on its account.
func TestReviewRWWriterThatGaveUpDoesNotBlockReaders(t *testing.T) {
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

// Close while RLock and Lock wait: both return ErrClosed at once, and leave
// no goroutine behind (goleak in TestMain).
func TestReviewRWCloseWhileWaiting(t *testing.T) {
	cl := startCluster(t, 3)
	holder := cl.newClient(t)
	c := cl.newClient(t)
	ctx := context.Background()
	w, err := rwMutex(t, holder, "close").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	m := rwMutex(t, c, "close")
	errs := make(chan error, 2)
	go func() { _, err := m.RLock(ctx); errs <- err }()
	go func() { _, err := m.Lock(ctx); errs <- err }()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	c.Close()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, redlock.ErrClosed) {
				t.Errorf("a waiting call at Close: %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiting call did not return after Close")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the waiting calls returned %v after Close", d)
	}
}

// A key of another type where the readers' set goes (a key-name clash,
// set while a writer holds): Downgrade deletes the writer's key before its
// ZADD fails, so the write hold is gone from every node while the client
// still holds it for writing (Reading false, Done open); a second writer is
// granted.
func TestReviewRWDowngradeOverAWrongTypeReadersKeyDropsTheWriteHold(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	other := cl.newClient(t)
	ctx := context.Background()
	const name = "wrongtype-down"
	w, err := rwMutex(t, c, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	for _, ic := range cl.inspect {
		if err := ic.Set(ctx, rwReaders(name), "clash", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	err = w.Downgrade(ctx)
	t.Logf("Downgrade: %v (ErrWrongType %v)", err, errors.Is(err, redlock.ErrWrongType))
	for _, ic := range cl.inspect {
		ic.Del(ctx, rwReaders(name)) // the clash goes away
	}
	w2, err := rwMutex(t, other, name).TryLock(ctx)
	if err == nil {
		defer w2.Unlock(ctx)
		if !w.Reading() && !isDone(w.Done()) {
			t.Errorf("a second writer (token %d) was granted while the first (token %d) holds for writing, valid for %v: "+
				"the failed Downgrade deleted its keys", w2.Token(), w.Token(), time.Until(w.Until()).Round(time.Millisecond))
		}
	}
}

// Two readers do not abort each other: B's higher token is committed first
// (HR), then A's lower one; A is granted (a reader aborts only on H or E).
func TestReviewRWReadersDoNotAbortEachOther(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	gate := make(chan struct{})
	hook := &faultHook{before: func(s string) error {
		if s == "rw-read-commit" {
			<-gate
		}
		return nil
	}}
	a := cl.hookedOn(t, map[int]redis.Hook{0: hook, 1: hook, 2: hook})
	b := cl.newClient(t)
	aDone := rwTryAsync(ctx, rwMutex(t, a, "readers"), true)
	time.Sleep(100 * time.Millisecond) // A's round 1 is in; its commit waits
	rb, err := rwMutex(t, b, "readers").TryRLock(ctx)
	if err != nil {
		close(gate)
		t.Fatal(err)
	}
	defer rb.Unlock(ctx)
	close(gate)
	ra := <-aDone
	if ra.err != nil {
		t.Fatalf("reader A, whose commit came after reader B's higher token: %v", ra.err)
	}
	defer ra.l.Unlock(ctx)
	if ra.l.Token() >= rb.Token() {
		t.Fatalf("the replay did not order the tokens: A %d, B %d", ra.l.Token(), rb.Token())
	}
}

// A Downgrade that reaches a majority only (cut on n2) leaves n2 a writer's
// key: Extend renews both kinds, Unlock removes both, and the lock is free.
func TestReviewRWPartialDowngradeThenExtendAndUnlock(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.hookedOn(t, map[int]redis.Hook{2: cutScript("rw-downgrade")}, redlock.WithTTL(2*time.Second))
	other := cl.newClient(t)
	ctx := context.Background()
	const name = "partial-down"
	w, err := rwMutex(t, c, name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Downgrade(ctx); err != nil {
		t.Fatalf("Downgrade on a majority: %v", err)
	}
	if n := cl.inspect[2].Exists(ctx, "redlock:{"+name+"}:rw").Val(); n != 1 {
		t.Fatalf("n2 should still hold the writer's key")
	}
	time.Sleep(time.Second)
	if err := w.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	// Extend returns at a majority: n2's extension may still be on its way.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		ms := cl.inspect[2].PTTL(ctx, "redlock:{"+name+"}:rw").Val()
		if ms >= 1200*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer's key on n2 was not extended: %v left", ms)
		}
	}
	if _, err := rwMutex(t, other, name).TryLock(ctx); !errors.Is(err, redlock.ErrLocked) {
		t.Errorf("a writer during the downgraded hold: %v, want ErrLocked", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w2, err := rwMutex(t, other, name).TryLock(ctx)
	if err != nil {
		t.Fatalf("a writer after the Unlock of a partly downgraded hold: %v", err)
	}
	_ = w2.Unlock(ctx)
}

// A reader's round 1 to two paused nodes lands after its attempt failed and
// was rolled back: the release markers refuse it, no zombie reader entry is
// left, and a writer is granted at once.
func TestReviewRWLateReadAfterRollbackLeavesNoEntry(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(5*time.Second))
	other := cl.newClient(t)
	ctx := context.Background()
	const name = "late-read"
	// Both clients' node lists are checked, and the nodes know the scripts.
	for _, cc := range []*redlock.Client{c, other} {
		r, err := rwMutex(t, cc, "warm").TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Unlock(ctx)
	}
	resume := cl.pause(t, 1, 2)
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := rwMutex(t, c, name).TryRLock(rctx)
	cancel()
	if err == nil {
		t.Fatal("a reader with 2 of 3 paused was granted")
	}
	time.Sleep(200 * time.Millisecond) // the rollbacks are sent meanwhile
	resume()
	time.Sleep(500 * time.Millisecond)
	for i, ic := range cl.inspect {
		if n := ic.ZCard(ctx, rwReaders(name)).Val(); n != 0 {
			t.Errorf("node %d keeps %d reader entries of a failed attempt", i, n)
		}
	}
	w, err := rwMutex(t, other, name).TryLock(ctx)
	if err != nil {
		t.Fatalf("a writer after the failed reader: %v", err)
	}
	_ = w.Unlock(ctx)
}

// Reentrant read through a context that is already cancelled: the RW lock
// hands out a new reentry, where Client.Lock's reentry reports ctx's error.
func TestReviewRWReentryThroughACancelledContext(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	r, err := rwMutex(t, c, "cancelled").TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	l, err := c.TryLock(ctx, "cancelled-mutex")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	rctx, cancel := context.WithCancel(r.Context(ctx))
	cancel()
	lctx, cancel2 := context.WithCancel(l.Context(ctx))
	cancel2()
	_, rerr := rwMutex(t, c, "cancelled").RLock(rctx, redlock.Reentrant())
	_, lerr := c.Lock(lctx, "cancelled-mutex", redlock.Reentrant())
	if (rerr == nil) != (lerr == nil) {
		t.Errorf("a reentry through a cancelled context: RWMutex.RLock %v, Client.Lock %v", rerr, lerr)
	}
}
