package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/redis/go-redis/v9"
)

// A reader's Unlock on a node where its read call has not landed yet
// leaves the value's release marker, as the mutex's release does, so that
// the late read call registers no reader entry that nobody holds (which
// kept writers out of that node for a TTL). rw_release.lua's reader branch
// passed a marker TTL of 0 whatever the library asked.
//
// Interleaving (N = 3, MaxRetries -1 so that go-redis sends one copy):
//  1. A's TryRLock: the read call to n2 is held in the network; n0 and n1
//     grant, A holds the read lock.
//  2. The call to n2 times out (ReadTimeout 300 ms); A unlocks: the
//     release reaches n2 first (not sure: the library asks for a marker).
//  3. The held read call reaches n2.
//
// The same with a mutex's TryLock/Unlock is the control.
//
// Origin: the adversarial review of the family model (stop 46); failed
// before the fix.
func TestALateReadCallAfterTheReadersUnlockRegistersNoReader(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	const ttl = 5 * time.Second

	late := func(t *testing.T, script string, lockUnlock func(c *redlock.Client)) {
		w := newReview32Wire(cl.nodes[2].Addr())
		w.log = t.Logf
		h := &review32Arm{w: w, script: script}
		clients := make([]redis.UniversalClient, 3)
		for i, n := range cl.nodes {
			opt := &redis.Options{Addr: n.Addr(), ReadTimeout: 300 * time.Millisecond, MaxRetries: -1}
			if i == 2 {
				opt.Dialer = w.dial
			}
			rc := redis.NewClient(opt)
			if i == 2 {
				rc.AddHook(h)
			}
			clients[i] = rc
		}
		t.Cleanup(w.open)
		a, err := redlock.New(clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			a.Close()
			for _, c := range clients {
				c.Close()
			}
		})
		h.arm.Store(true)
		lockUnlock(a)
		select {
		case <-w.held:
		default:
			t.Fatal("the acquisition call to n2 was not held")
		}
		review32Quiet(t, map[int]*review32Arm{2: h}) // the release on n2 has been answered
		w.open()
		<-w.landed
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("mutex", func(t *testing.T) {
		late(t, "acquire", func(a *redlock.Client) {
			l, err := a.TryLock(ctx, "mx")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(400 * time.Millisecond) // as the reader's
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
		key, _, _ := lease.LockKeys("redlock", "mx")
		if n := cl.inspect[2].Exists(ctx, key).Val(); n != 0 {
			t.Fatalf("the mutex's late acquisition re-created its key on n2 after Unlock")
		}
	})
	t.Run("reader", func(t *testing.T) {
		late(t, "rw-read", func(a *redlock.Client) {
			rw, err := a.RWMutex("rx")
			if err != nil {
				t.Fatal(err)
			}
			l, err := rw.TryRLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(400 * time.Millisecond) // past n2's ReadTimeout: its release is sent, not sure
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
		readers := lease.ReadersKey(lease.RWKey("redlock", "rx"))
		zs := cl.inspect[2].ZRangeWithScores(ctx, readers, 0, -1).Val()
		if len(zs) != 0 {
			pttl := cl.inspect[2].PTTL(ctx, readers).Val()
			t.Errorf("after the reader's Unlock, its late read call registered a reader entry on n2 (%v, set lives %v more): "+
				"rw_release.lua's reader Unlock left no release marker; a writer is refused there for a TTL", zs, pttl)
		}
	})
}
