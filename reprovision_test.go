package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Issue 32, Reprovision: 3 nodes; A holds "x" on n0 and n1 (n2 cut off for
// A); n1 (or n0 and n1) restarted empty; an operator reprovisions at once,
// as docs/operations.md describes for a deployment that lost data; B over
// n1 and n2 takes "x". Before the fix Reprovision readmitted the emptied
// nodes at once, and B was granted with 9.8 s of A's validity left (9.7 s
// with two nodes wiped). Now Reprovision waits out the delayed restart of
// every node that lost its data, so B is granted only once A's validity
// has passed, and every later token still exceeds the given floor.
func TestReprovisionWaitsOutTheDelayedRestart(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	for name, wiped := range map[string][]int{"one-wiped": {1}, "majority-wiped": {0, 1}} {
		t.Run(name, func(t *testing.T) {
			cl := startCluster(t, 3)
			ctx := context.Background()
			const ttl = 2 * time.Second
			a := cl.actor(t, []*faultHook{nil, nil, cut()}, redlock.WithTTL(ttl),
				redlock.WithNodeTimeout(200*time.Millisecond))
			la, err := a.TryLock(ctx, "x")
			if err != nil {
				t.Fatalf("A: %v", err)
			}
			for _, i := range wiped {
				cl.restartEmpty(t, i)
			}
			// The longest TTL in use is what the nodes that answer recorded,
			// or the reprovisioning client's own: with one node wiped, n0
			// recorded A's, and the operator's client may use a shorter one;
			// with n0 and n1 wiped, only the operator's client can tell it.
			opTTL := time.Second
			if len(wiped) > 1 {
				opTTL = ttl
			}
			op := cl.newClient(t, redlock.WithTTL(opTTL), redlock.WithNodeTimeout(200*time.Millisecond))
			if err := op.Reprovision(ctx, la.Token()); err != nil {
				t.Fatalf("Reprovision: %v", err)
			}
			b := cl.actor(t, []*faultHook{cut(), nil, nil}, redlock.WithTTL(ttl),
				redlock.WithNodeTimeout(200*time.Millisecond))
			var lb *redlock.Lock
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if lb, err = b.TryLock(ctx, "x"); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatalf("B was never granted after the reprovision: %v", err)
			}
			granted := time.Now()
			defer lb.Unlock(ctx)
			if left := la.Until().Sub(granted); left > 0 {
				t.Fatalf("B granted token %d while A (token %d) has %v left", lb.Token(), la.Token(), left)
			}
			if lb.Token() <= la.Token() {
				t.Errorf("B's token %d is not above the reprovision's floor %d", lb.Token(), la.Token())
			}
		})
	}
}

// A Reprovision whose ctx ends before the delayed restart has passed
// writes nothing and says how long is left, with ErrRepairTooSoon.
func TestReprovisionTooSoonForItsDeadline(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	l, err := c.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	cl.restartEmpty(t, 0)
	cl.restartEmpty(t, 1)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err = c.Reprovision(short, l.Token())
	var tooSoon *redlock.RepairTooSoonError
	if !errors.Is(err, redlock.ErrRepairTooSoon) || !errors.As(err, &tooSoon) || tooSoon.Wait <= time.Second {
		t.Fatalf("Reprovision with 1 s left of a 5 s delay: %v, want a *RepairTooSoonError", err)
	}
	ids, _ := c.NodeIDs(ctx)
	if ids[0] >= 0 || ids[1] >= 0 {
		t.Errorf("the emptied nodes were given ids %v by a reprovision that gave up", ids)
	}
}

// Reprovision's writes are conditional on what it read after the wait: a
// node that loses its data again between that read and its reset (here n1,
// restarted empty while its reset is held on the wire) is left out, not
// readmitted with no delay, and Reprovision says which node changed.
func TestReprovisionLeavesOutANodeWipedDuringIt(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	var once sync.Once
	hold := &faultHook{before: func(s string) error {
		if s == "reset" {
			once.Do(func() { cl.restartEmpty(t, 1) })
		}
		return nil
	}}
	op := cl.actor(t, []*faultHook{nil, hold, nil}, redlock.WithTTL(3*time.Second),
		redlock.WithNodeTimeout(time.Second))
	err := op.Reprovision(ctx, 1000)
	if !errors.Is(err, redlock.ErrAmnesia) {
		t.Fatalf("Reprovision with n1 wiped before its reset: %v, want ErrAmnesia naming node 1", err)
	}
	ids, _ := cl.newClient(t).NodeIDs(ctx)
	if ids[1] >= 0 {
		t.Fatalf("n1, wiped during the reprovision, was given id %d at once (ids %v)", ids[1], ids)
	}
}

// Reprovision(ctx, above) raises every node's counter so that every later
// token exceeds above. Tokens are c*256 + id and must stay below 2^53 (exact
// in Lua doubles and JSON), so above must leave room under 2^53 for the
// tokens that follow: Reprovision only checked above < 2^53. With above =
// 2^53-1 the floor is 2^45, and the first token after it is 2^53 + 256 + id
// at least, out of range (and not exactly representable in the scripts).
// A floor with headroom (2^40) must still be accepted, and tokens then
// exceed it.
//
// On today's code (5e7ef93):
//
//	edges6_test.go:61: Reprovision(2^53-1) = <nil>, want ErrTokenRange; the next lock's token is 9007199254741250 (2^53 = 9007199254740992)
//
// Origin: the sixth round of edge-case replays (issue 32's review).
func TestReprovisionRefusesAFloorThatLeavesNoTokens(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(300*time.Millisecond))

	const headroom = 1 << 40
	if err := c.Reprovision(ctx, headroom); err != nil {
		t.Fatalf("Reprovision(2^40): %v, want it accepted", err)
	}
	l, err := c.TryLock(ctx, "after")
	if err != nil {
		t.Fatal(err)
	}
	if tok := l.Token(); tok <= headroom || tok >= 1<<53 {
		t.Errorf("token after Reprovision(2^40) is %d, want in (2^40, 2^53)", tok)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	err = c.Reprovision(ctx, 1<<53-1)
	if errors.Is(err, redlock.ErrTokenRange) {
		return
	}
	next := "none"
	if l, lerr := c.TryLock(ctx, "after"); lerr == nil {
		next = strconv.FormatUint(l.Token(), 10)
		l.Unlock(ctx)
	} else {
		next = "an error: " + lerr.Error()
	}
	t.Fatalf("Reprovision(2^53-1) = %v, want ErrTokenRange; the next lock's token is %s (2^53 = %d)",
		err, next, uint64(1)<<53)
}
