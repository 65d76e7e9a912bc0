package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Found by an adversarial review, and held: a holder that took the lock by waiting (Lock, queued) stays
// at the head of the name's queue until its own Unlock removes it
// (release.lua ZREMs ARGV[4], the holder's waiter id). revoke.lua calls
// releaseOne with ARGV[4] = ” so the revoked holder's entry is left at the
// head, still live by its SEEN, and the revocation promises the lock to the
// revoked holder itself: the real waiter is neither woken nor let in until
// its own retry delay.
func TestRevokeOfAQueuedHolderHandsTheLockToTheNextWaiter(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first := cl.newClient(t)
	holder := cl.newClient(t, redlock.WithTTL(time.Minute), redlock.WithRetryDelay(8*time.Second, 8*time.Second))
	waiter := cl.newClient(t, redlock.WithRetryDelay(8*time.Second, 8*time.Second))
	operator := cl.newClient(t)

	l0, err := first.TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *redlock.Lock, 1)
	go func() {
		l, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(200 * time.Millisecond) // holder queued
	if err := l0.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got // the holder took the lock from the queue
	if l == nil {
		t.FailNow()
	}
	wgot := make(chan time.Time, 1)
	go func() {
		w, err := waiter.Lock(ctx, "job")
		if err != nil {
			t.Error(err)
			wgot <- time.Time{}
			return
		}
		wgot <- time.Now()
		w.Unlock(context.Background())
	}()
	time.Sleep(300 * time.Millisecond) // waiter refused and queued
	rv, err := operator.Revoke(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if rv.Holder != l.ID() {
		t.Fatalf("revoked %q, want %q", rv.Holder, l.ID())
	}
	revoked := time.Now()
	select {
	case at := <-wgot:
		t.Logf("the waiter took the lock %v after the revocation", at.Sub(revoked))
	case <-time.After(3 * time.Second):
		for i, c := range cl.inspect {
			q, _ := c.ZRangeWithScores(ctx, "redlock:{job}:queue", 0, -1).Result()
			n, _ := c.Get(ctx, "redlock:{job}:next").Result()
			t.Logf("node %d: queue %v next %q", i, q, n)
		}
		t.Fatalf("the waiter was not handed the revoked lock within 3 s (retry delay 8 s): " +
			"the revocation promised it to the revoked holder, still at the head of the queue")
	}
}

// blockHook holds every call of a name's queue keys (a revocation's, not
// Inspect's) on its wire until release is closed, once armed.
type blockHook struct {
	armed   chan struct{}
	release chan struct{}
}

func (h *blockHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *blockHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *blockHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		touchesQueue := false
		for _, a := range cmd.Args() {
			if k, ok := a.(string); ok && strings.HasSuffix(k, ":next") {
				touchesQueue = true
			}
		}
		select {
		case <-h.armed:
			if touchesQueue {
				<-h.release
			}
		default:
		}
		return next(ctx, cmd)
	}
}

// Found by an adversarial review: Client.Revoke released whatever value
// each node held, not only the holder it reports. Fixed: it releases on
// each node only the value its read found there. Holder A holds nodes 0,1,3,4 (its acquisition
// missed node 2). The revocation reaches 0,1,3,4 first; meanwhile B (cut
// from 3 and 4) takes 0,1,2, a majority. The revocation then lands on
// node 2 and deletes B's value there. Revoke reports Holder A; B, never
// reported, keeps 2 of 5 nodes while it believes it holds the lock, and C
// takes 2,3,4: two holders at once, with nothing in the Revocation's
// Holder (nor the log) naming B.
func TestRevokeLeavesAHolderThatCameAfterItsRead(t *testing.T) {
	cl := startCluster(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := cl.hookedOn(t, map[int]redis.Hook{2: cut()}, redlock.WithTTL(time.Minute))
	la, err := a.TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	bh := &blockHook{armed: make(chan struct{}), release: make(chan struct{})}
	operator := cl.hookedOn(t, map[int]redis.Hook{2: bh}, redlock.WithNodeTimeout(5*time.Second), redlock.WithTTL(time.Minute))
	b := cl.hookedOn(t, map[int]redis.Hook{3: cut(), 4: cut()}, redlock.WithTTL(time.Minute))
	c := cl.newClient(t, redlock.WithTTL(time.Minute))

	close(bh.armed)
	type res struct {
		rv  redlock.Revocation
		err error
	}
	done := make(chan res, 1)
	go func() {
		rv, err := operator.Revoke(ctx, "job")
		done <- res{rv, err}
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h := cl.holders(t, "job")
		if h[0] == "" && h[1] == "" && h[3] == "" && h[4] == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revocation did not reach 0,1,3,4: %q", h)
		}
	}
	lb, err := b.TryLock(ctx, "job")
	if err != nil {
		t.Fatalf("B: %v", err)
	}
	close(bh.release)
	r := <-done
	t.Logf("Revoke: holder %q revoked %q err %v (A %s, B %s)", r.rv.Holder, r.rv.Revoked, r.err, la.ID(), lb.ID())
	time.Sleep(100 * time.Millisecond)
	t.Logf("nodes now: %q", cl.holders(t, "job"))
	lc, err := c.TryLock(ctx, "job")
	if err != nil {
		t.Logf("C refused: %v", err)
		return
	}
	defer lc.Unlock(ctx)
	if r.rv.Holder != lb.ID() && time.Now().Before(lb.Until()) {
		t.Fatalf("Revoke reported holder %q but released B (%s) on node 2, leaving B on a minority while "+
			"its validity runs to %v: C now holds the lock too (tokens B %d, C %d)",
			r.rv.Holder, lb.ID(), lb.Until().Format(time.StampMilli), lb.Token(), lc.Token())
	}
}
