// Package fencetest is the conformance suite every fence.Fence must pass:
// the in-memory, Redis, PostgreSQL and HTTP fences here, and any a user writes.
package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/quorumlock/redlock/fence"
)

// Run runs the suite. newFence returns an empty fence for each subtest. A
// fence.ReadFence also runs the read mark's subtests.
func Run(t *testing.T, newFence func(t *testing.T) fence.Fence) {
	ctx := context.Background()

	t.Run("order", func(t *testing.T) {
		f := newFence(t)
		mustAdmit(t, f, "r", 5, "a")
		mustAdmit(t, f, "r", 9, "b")
		err := f.Admit(ctx, "r", 7, "c")
		var stale *fence.StaleTokenError
		if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Admit(7) after 9: %v, want a *StaleTokenError", err)
		}
		if stale.Token != 7 || stale.Highest != 9 || stale.Resource != "r" {
			t.Fatalf("stale error carries %+v, want token 7, highest 9, resource r", *stale)
		}
		mustAdmit(t, f, "r", 10, "d")
		if err := f.Admit(ctx, "r", 9, "b"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("the old holder came back: %v, want ErrStale", err)
		}
	})

	t.Run("equal tokens", func(t *testing.T) {
		f := newFence(t)
		mustAdmit(t, f, "r", 3, "a")
		mustAdmit(t, f, "r", 3, "a") // the same holder again, or a retry
		mustAdmit(t, f, "r", 3, "")  // holder unknown: cannot tell, admitted
		err := f.Admit(ctx, "r", 3, "b")
		var reused *fence.ReusedTokenError
		if !errors.As(err, &reused) || !errors.Is(err, fence.ErrTokenReused) {
			t.Fatalf("token 3 from another holder: %v, want a *ReusedTokenError", err)
		}
		if reused.Holder != "b" || reused.StoredHolder != "a" {
			t.Fatalf("reused error carries %+v", *reused)
		}
	})

	t.Run("resources kept apart", func(t *testing.T) {
		f := newFence(t)
		mustAdmit(t, f, "x", 100, "a")
		mustAdmit(t, f, "y", 1, "b")
		if err := f.Admit(ctx, "x", 99, "c"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("x: %v, want ErrStale", err)
		}
		mustAdmit(t, f, "y", 2, "c")
	})

	t.Run("bad input", func(t *testing.T) {
		f := newFence(t)
		if err := f.Admit(ctx, "r", 0, "a"); !errors.Is(err, fence.ErrZeroToken) {
			t.Errorf("zero token: %v, want ErrZeroToken", err)
		}
		if err := f.Admit(ctx, "", 1, "a"); !errors.Is(err, fence.ErrEmptyResource) {
			t.Errorf("empty resource: %v, want ErrEmptyResource", err)
		}
		mustAdmit(t, f, "r", 1, "a") // nothing was recorded by the bad calls
	})

	t.Run("large tokens", func(t *testing.T) {
		f := newFence(t)
		const big = 1<<53 - 1
		mustAdmit(t, f, "r", big-1, "a")
		mustAdmit(t, f, "r", big, "b")
		if err := f.Admit(ctx, "r", big-1, "a"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("big-1 after big: %v, want ErrStale", err)
		}
	})

	// Pairs of tokens that one float64 cannot tell apart. A fence must order
	// them exactly, or refuse them with ErrTokenRange and record nothing.
	t.Run("tokens beyond 2^53", func(t *testing.T) {
		f := newFence(t)
		pairs := []struct{ hi, lo uint64 }{
			{1<<53 + 1, 1 << 53},
			{1<<60 + 100, 1<<60 + 1},
			{1<<63 + 1, 1 << 63},
			{math.MaxUint64, math.MaxUint64 - 1},
		}
		for i, p := range pairs {
			res := fmt.Sprint("big", i)
			err := f.Admit(ctx, res, p.hi, "a")
			if errors.Is(err, fence.ErrTokenRange) {
				if err := f.Admit(ctx, res, p.lo, ""); !errors.Is(err, fence.ErrTokenRange) {
					t.Errorf("%d refused as out of range, but %d: %v", p.hi, p.lo, err)
				}
				mustAdmit(t, f, res, 1, "c") // the refusals recorded nothing
				continue
			}
			if err != nil {
				t.Fatalf("Admit(%d): %v", p.hi, err)
			}
			// An unknown holder: were the tokens taken as equal, it would
			// be admitted.
			if err := f.Admit(ctx, res, p.lo, ""); !errors.Is(err, fence.ErrStale) {
				t.Errorf("%d after %d: %v, want ErrStale", p.lo, p.hi, err)
			}
		}
	})

	if _, ok := newFence(t).(fence.ReadFence); ok {
		runRead(t, func(t *testing.T) fence.ReadFence { return newFence(t).(fence.ReadFence) })
	}

	t.Run("concurrent admits", func(t *testing.T) {
		f := newFence(t)
		const workers, perWorker = 8, 50
		tokens := rand.Perm(workers * perWorker)
		var wg sync.WaitGroup
		admitted := make([][]uint64, workers)
		errs := make(chan error, workers*perWorker)
		for w := range workers {
			wg.Go(func() {
				for _, tok := range tokens[w*perWorker : (w+1)*perWorker] {
					token := uint64(tok + 1)
					err := f.Admit(ctx, "hot", token, fmt.Sprint("h", token))
					var stale *fence.StaleTokenError
					switch {
					case err == nil:
						admitted[w] = append(admitted[w], token)
					case errors.As(err, &stale):
						if stale.Highest <= token {
							errs <- fmt.Errorf("token %d called stale against highest %d", token, stale.Highest)
						}
					default:
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// Admissions are ordered: what one worker got admitted must grow.
		for w, got := range admitted {
			for i := 1; i < len(got); i++ {
				if got[i] <= got[i-1] {
					t.Fatalf("worker %d: %d admitted after %d", w, got[i], got[i-1])
				}
			}
		}
		top := uint64(workers * perWorker)
		if err := f.Admit(ctx, "hot", top-1, "late"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("after the storm, %d: %v, want ErrStale (highest must be %d)", top-1, err, top)
		}
		mustAdmit(t, f, "hot", top, fmt.Sprint("h", top))
	})
}

// runRead is the suite of a ReadFence's read mark (Run runs it when the
// fence is one).
func runRead(t *testing.T, newFence func(t *testing.T) fence.ReadFence) {
	ctx := context.Background()
	read := func(t *testing.T, f fence.ReadFence, res string, token uint64, holder string) {
		t.Helper()
		if err := f.AdmitRead(ctx, res, token, holder); err != nil {
			t.Fatalf("AdmitRead(%q, %d, %q): %v", res, token, holder, err)
		}
	}

	// The history the read mark exists for: a paused writer's delayed write
	// lands after a later reader read.
	t.Run("read mark refuses a delayed write", func(t *testing.T) {
		f := newFence(t)
		mustAdmit(t, f, "r", 6, "w")
		read(t, f, "r", 7, "reader")
		err := f.Admit(ctx, "r", 6, "w")
		var stale *fence.StaleTokenError
		if !errors.As(err, &stale) || stale.Highest != 7 {
			t.Fatalf("the writer's delayed write (6) after a read (7): %v, want stale against 7", err)
		}
		mustAdmit(t, f, "r", 8, "w2")
	})

	t.Run("reads in any order, writes after every read", func(t *testing.T) {
		f := newFence(t)
		mustAdmit(t, f, "r", 5, "w")
		read(t, f, "r", 9, "a")
		read(t, f, "r", 7, "b") // readers do not conflict: below the read mark is fine
		if err := f.AdmitRead(ctx, "r", 4, "c"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("a read (4) below the write mark (5): %v, want ErrStale", err)
		}
		if err := f.Admit(ctx, "r", 8, "w2"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("a write (8) below the read mark (9): %v, want ErrStale", err)
		}
		if err := f.Admit(ctx, "r", 9, "w2"); !errors.Is(err, fence.ErrTokenReused) {
			t.Fatalf("a write with the read mark's token from another holder: %v, want ErrTokenReused", err)
		}
		mustAdmit(t, f, "r", 10, "w3")
		if err := f.AdmitRead(ctx, "r", 9, "a"); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("a read (9) after a write (10): %v, want ErrStale", err)
		}
	})

	t.Run("a writer reads its own data", func(t *testing.T) {
		f := newFence(t)
		mustAdmit(t, f, "r", 6, "w")
		read(t, f, "r", 6, "w")
		mustAdmit(t, f, "r", 6, "w")
		if err := f.AdmitRead(ctx, "r", 6, "other"); !errors.Is(err, fence.ErrTokenReused) {
			t.Fatalf("a read with the write mark's token from another holder: %v, want ErrTokenReused", err)
		}
	})

	t.Run("read bad input", func(t *testing.T) {
		f := newFence(t)
		if err := f.AdmitRead(ctx, "r", 0, "a"); !errors.Is(err, fence.ErrZeroToken) {
			t.Errorf("zero token: %v, want ErrZeroToken", err)
		}
		if err := f.AdmitRead(ctx, "", 1, "a"); !errors.Is(err, fence.ErrEmptyResource) {
			t.Errorf("empty resource: %v, want ErrEmptyResource", err)
		}
		mustAdmit(t, f, "r", 1, "a")
	})
}

func mustAdmit(t *testing.T, f fence.Fence, resource string, token uint64, holder string) {
	t.Helper()
	if err := f.Admit(context.Background(), resource, token, holder); err != nil {
		t.Fatalf("Admit(%q, %d, %q): %v", resource, token, holder, err)
	}
}
