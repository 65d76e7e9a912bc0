package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// Fencing across the family: the commit's abort rule between readers,
// writers, multi-locks and mutexes (counterexample 3 of docs/fencing.md).

// Counterexample 3 (fencing.md) across primitives: B's round 1 reaches n1
// before A's commit there and n2 only after A unlocked; A commits on
// {n0, n1}. B must then abort in round 2 (ErrSuperseded) or hold a token
// above A's: the multi-lock's commit checks every member's H, not only the
// first, and commits H for every member, so a mutex of the second member
// sees it.
// Origin: the adversarial review of the multi-lock.
func TestCounterexample3AcrossPrimitives(t *testing.T) {
	for _, tc := range []struct {
		name         string
		aNames       []string // A: one name is a mutex
		bNames       []string
		bAcquire     string
		aCommitCutN2 string
	}{
		{"mutex A, multi B", []string{"ce-b"}, []string{"ce-a", "ce-b"}, "multi-acquire", "commit"},
		{"multi A, mutex B", []string{"ce-b", "ce-c"}, []string{"ce-b"}, "acquire", "multi-commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := startCluster(t, 3)
			cl.withCounter(t, 0, 7)
			opts := []redlock.Option{redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(10 * time.Second)}
			ctx := context.Background()
			bReachedN1 := make(chan struct{})
			releaseN2 := make(chan struct{})
			var once sync.Once
			b := cl.actor(t, []*faultHook{
				cut(),
				{after: func(s string) {
					if s == tc.bAcquire {
						once.Do(func() { close(bReachedN1) })
					}
				}},
				{before: func(s string) error {
					if s == tc.bAcquire {
						<-releaseN2
					}
					return nil
				}},
			}, opts...)
			a := cl.actor(t, []*faultHook{nil, nil, cutScript(tc.aCommitCutN2)}, opts...)
			type res struct {
				token uint64
				err   error
			}
			lock := func(c *redlock.Client, names []string) (uint64, func(context.Context) error, error) {
				if len(names) == 1 {
					l, err := c.TryLock(ctx, names[0])
					if err != nil {
						return 0, nil, err
					}
					return l.Token(), l.Unlock, nil
				}
				m, err := c.TryLockMulti(ctx, names)
				if err != nil {
					return 0, nil, err
				}
				return m.Token(), m.Unlock, nil
			}
			bDone := make(chan res, 1)
			go func() {
				tok, unlock, err := lock(b, tc.bNames)
				if err == nil {
					defer unlock(ctx)
				}
				bDone <- res{tok, err}
			}()
			<-bReachedN1
			ta, unlock, err := lock(a, tc.aNames)
			if err != nil {
				close(releaseN2)
				t.Fatalf("A: %v", err)
			}
			if err := unlock(ctx); err != nil {
				close(releaseN2)
				t.Fatalf("A unlock: %v", err)
			}
			close(releaseN2)
			rb := <-bDone
			t.Logf("A committed %d and unlocked; B: token %d, %v", ta, rb.token, rb.err)
			if rb.err == nil && rb.token <= ta {
				t.Fatalf("B granted with %d after A's %d was committed", rb.token, ta)
			}
			if rb.err != nil && !errors.Is(rb.err, redlock.ErrSuperseded) {
				t.Errorf("B failed with %v, want ErrSuperseded", rb.err)
			}
		})
	}
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
// Origin: the adversarial review of the read-write lock.
func TestRWCommitAbortsAcrossSides(t *testing.T) {
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

// Two readers do not abort each other: B's higher token is committed first
// (HR), then A's lower one; A is granted (a reader aborts only on H or E).
// Origin: the adversarial review of the read-write lock.
func TestRWReadersDoNotAbortEachOther(t *testing.T) {
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
