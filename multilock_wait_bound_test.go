package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Issue 34: a waiting multi-lock over {a, b}, each member held in turns by
// two Lock callers of its own, the turns overlapping so that a is released
// only while b is held and b only while a is: neither is ever free and
// unpromised at once. Each release promised its member to the multi-lock
// (first in line), which could not use it (the other member held) and
// passed it on to the member's next Lock caller: it waited without bound
// (docs/multilock.md, "not bounded", before; this replay failed then).
// Now, once it has waited its TTL, it keeps a member promised to it, and
// the other member comes to it at its next release: it gets the set within
// its TTL and a turn or two.
func TestAMultiLockIsNotStarvedByOverlappingTurnsOnTwoMembers(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type turn struct {
		name    string
		release chan struct{}
	}
	took := make(chan turn)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// lockers take name in a loop; each hold lasts until the conductor
	// releases it.
	locker := func(name string, first *redlock.Lock) {
		c := cl.newClient(t)
		wg.Go(func() {
			l := first
			for ctx.Err() == nil {
				if l == nil {
					var err error
					if l, err = c.Lock(ctx, name); err != nil {
						continue
					}
				}
				tn := turn{name, make(chan struct{})}
				select {
				case took <- tn:
				case <-ctx.Done():
				}
				select {
				case <-tn.release:
				case <-ctx.Done():
				}
				_ = l.Unlock(context.Background())
				l = nil
			}
		})
	}
	for _, name := range []string{"wb-a", "wb-b"} {
		l, err := cl.newClient(t).TryLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		locker(name, l)
		locker(name, nil)
	}
	held := map[string]turn{}
	for range 2 {
		tn := <-took
		held[tn.name] = tn
	}
	cl.inQueue(t, "wb-a", 1)
	cl.inQueue(t, "wb-b", 1)

	const ttl = time.Second
	m := cl.newClient(t, redlock.WithTTL(ttl))
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*ttl)
		defer cancel()
		ml, err := m.LockMulti(wctx, []string{"wb-a", "wb-b"})
		if err == nil {
			err = ml.Unlock(context.Background())
		}
		done <- err
	}()
	cl.inQueue(t, "wb-a", 2)
	cl.inQueue(t, "wb-b", 2)
	turns := 0
	for name := "wb-a"; ; {
		close(held[name].release)
		delete(held, name)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("LockMulti waited %v through %d overlapping member turns and got nothing: %v",
					time.Since(start).Round(time.Millisecond), turns, err)
			}
			t.Logf("LockMulti got {wb-a, wb-b} after %v (its TTL %v), %d member turns meanwhile",
				time.Since(start).Round(time.Millisecond), ttl, turns)
			return
		case tn := <-took:
			turns++
			held[tn.name] = tn
		case <-time.After(200 * time.Millisecond):
			// Nobody took it: promised to the multi-lock, which keeps it.
		}
		if name == "wb-a" {
			name = "wb-b"
		} else {
			name = "wb-a"
		}
		if _, ok := held[name]; !ok {
			// Neither member held: the multi-lock may take them both.
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("LockMulti got {wb-a, wb-b} after %v, %d member turns meanwhile", time.Since(start).Round(time.Millisecond), turns)
				return
			case <-time.After(5 * ttl):
				t.Fatal("both members free, and the multi-lock did not take them")
			}
		}
	}
}

// What the bound costs, and where it ends: a multi-lock that has waited
// its TTL keeps a member promised to it while its other member is held, so
// the member's next Lock waiter waits too; when the multi-lock gives up,
// it leaves the member's queue and frees the member at once (leave.lua
// drops the promise and wakes the member's waiters).
func TestAMultiLockKeepsAPromisedMemberUntilItGivesUp(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	holder := cl.newClient(t, redlock.WithTTL(30*time.Second))
	a, err := holder.TryLock(ctx, "wk-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := holder.TryLock(ctx, "wk-b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	const ttl = 300 * time.Millisecond
	m := cl.newClient(t, redlock.WithTTL(ttl))
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	multi := make(chan error, 1)
	go func() {
		_, err := m.LockMulti(mctx, []string{"wk-a", "wk-b"})
		multi <- err
	}()
	cl.inQueue(t, "wk-a", 1)
	got := lockAndUnlock(cl.newClient(t), "wk-a", 20*time.Second)
	cl.inQueue(t, "wk-a", 2)
	time.Sleep(2 * ttl)                   // the multi-lock has waited past its TTL
	if err := a.Unlock(ctx); err != nil { // promised to the multi-lock, first in line
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("the Lock waiter behind the multi-lock got wk-a (%v) while the multi-lock, past its TTL, waited for wk-b: "+
			"the multi-lock passed its promise on", err)
	case <-time.After(time.Second):
	}
	// Free, and refused: the error says why (Inspect shows it free).
	_, err = cl.newClient(t).TryLock(ctx, "wk-a")
	if !errors.Is(err, redlock.ErrLocked) || !strings.Contains(err.Error(), "promised to a waiting caller") {
		t.Errorf("TryLock of the kept member: %v, want ErrLocked saying it is promised to a waiting caller", err)
	}
	mcancel()
	if err := <-multi; err == nil {
		t.Fatal("the multi-lock got its set with wk-b held")
	}
	gaveUp := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the Lock waiter after the multi-lock gave up: %v", err)
		}
		t.Logf("the Lock waiter got wk-a %v after the multi-lock gave up", time.Since(gaveUp).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the Lock waiter did not get wk-a within 5 s of the multi-lock giving up")
	}
}
