package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Issue 35: Inspect for every primitive. Before it, Client.Inspect knew
// mutex keys only and said a write-held or read-held read-write lock, and a
// semaphore whose permits were all taken, was free.

// waitFor polls cond every 10 ms for 5 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("after 5 s: %s", what)
}

// A read-write lock's Inspect shows its readers (by id), the writer that
// waits behind them, and then the writer that holds it, with its token.
func TestInspectShowsTheReadWriteLocksReadersWaitersAndWriter(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(time.Minute), redlock.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	rw, err := c.RWMutex("inspected-rw")
	if err != nil {
		t.Fatal(err)
	}
	before := cl.dbSizes(t)
	info, err := rw.Inspect(ctx)
	if err != nil || info.Write.Held || len(info.Readers) != 0 || info.WritersQueued != 0 || len(info.Nodes) != 5 {
		t.Fatalf("a free read-write lock: %+v, %v", info, err)
	}
	if after := cl.dbSizes(t); !slices.Equal(before, after) {
		t.Errorf("Inspect wrote: key counts %v -> %v", before, after)
	}
	r1, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.TryRLock(ctx, redlock.For(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	info, err = rw.Inspect(ctx)
	if err != nil || info.Write.Held || len(info.Readers) != 2 {
		t.Fatalf("two readers: %+v, %v", info, err)
	}
	// The longest remaining first: r1's minute, then r2's 30 s.
	if info.Readers[0].Holder != r1.ID() || info.Readers[1].Holder != r2.ID() ||
		info.Readers[0].Remaining <= 50*time.Second || info.Readers[1].Remaining > 30*time.Second || info.Readers[1].Remaining <= 20*time.Second {
		t.Errorf("readers %+v, want %s (a minute) then %s (30 s)", info.Readers, r1.ID(), r2.ID())
	}
	if info.ReadToken < max(r1.Token(), r2.Token()) {
		t.Errorf("read token %d, the readers' %d and %d", info.ReadToken, r1.Token(), r2.Token())
	}

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := make(chan *redlock.RWLock, 1)
	go func() {
		w, err := rw.Lock(wctx)
		if err != nil {
			t.Errorf("the writer: %v", err)
		}
		got <- w
	}()
	waitFor(t, "the writer waits in the queue", func() bool {
		info, err = rw.Inspect(ctx)
		return err == nil && info.WritersQueued == 1
	})
	if info.Write.Held || len(info.Readers) != 2 {
		t.Errorf("readers with a writer waiting: %+v", info)
	}
	for _, r := range []*redlock.RWLock{r1, r2} {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w := <-got
	if w == nil {
		t.FailNow()
	}
	// The writer came from the queue: it stays in it while it holds.
	info, err = rw.Inspect(ctx)
	if err != nil || !info.Write.Held || info.Write.Holder != w.ID() || info.Write.Token != w.Token() || w.Token() == 0 ||
		len(info.Readers) != 0 || info.WritersQueued != 1 {
		t.Errorf("write-held: %+v, %v; want holder %s, token %d, the holder queued", info, err, w.ID(), w.Token())
	}
	if info.Write.Remaining <= 50*time.Second {
		t.Errorf("the writer's remaining time: %v", info.Write.Remaining)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	info, err = rw.Inspect(ctx)
	if err != nil || info.Write.Held || len(info.Readers) != 0 || info.WritersQueued != 0 {
		t.Errorf("after the writer's Unlock: %+v, %v", info, err)
	}
}

// A semaphore's Inspect shows the size stored, which slots each permit
// holds, how many are free and who waits in line.
func TestInspectShowsTheSemaphoresHoldersFreeSlotsAndLine(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(time.Minute), redlock.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	s, err := c.Semaphore("inspected-sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Inspect(ctx)
	if err != nil || info.Permits != 0 || info.Free != 3 || len(info.Slots) != 3 || len(info.Holders) != 0 {
		t.Fatalf("a semaphore never acquired: %+v, %v", info, err)
	}
	two, err := s.TryAcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	one, err := s.TryAcquire(ctx, redlock.For(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	info, err = s.Inspect(ctx)
	if err != nil || info.Permits != 3 || info.Free != 0 || len(info.Holders) != 2 {
		t.Fatalf("all three slots held: %+v, %v", info, err)
	}
	// The least remaining first: one's 30 s, then two's minute.
	h0, h1 := info.Holders[0], info.Holders[1]
	if h0.Holder != one.ID() || !slices.Equal(h0.Slots, one.Slots()) || h0.Token != one.Token() ||
		h1.Holder != two.ID() || !slices.Equal(h1.Slots, two.Slots()) || h1.Token != two.Token() {
		t.Errorf("holders %+v, want %s on %v then %s on %v", info.Holders, one.ID(), one.Slots(), two.ID(), two.Slots())
	}
	if h0.Remaining > 30*time.Second || h0.Remaining <= 20*time.Second || h1.Remaining <= 50*time.Second {
		t.Errorf("remaining: %v and %v", h0.Remaining, h1.Remaining)
	}

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := make(chan *redlock.Permit, 1)
	go func() {
		p, err := s.Acquire(wctx)
		if err != nil {
			t.Errorf("the waiter: %v", err)
		}
		got <- p
	}()
	waitFor(t, "the waiter is in line", func() bool {
		info, err = s.Inspect(ctx)
		return err == nil && info.Waiting == 1
	})
	if err := one.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if p == nil {
		t.FailNow()
	}
	defer p.Release(ctx)
	if err := two.Release(ctx); err != nil {
		t.Fatal(err)
	}
	info, err = s.Inspect(ctx)
	if err != nil || info.Free != 2 || info.Waiting != 0 || len(info.Holders) != 1 || info.Holders[0].Holder != p.ID() {
		t.Errorf("one permit held, none waiting: %+v, %v (want holder %s)", info, err, p.ID())
	}
}

// InspectMulti shows every member of a multi-lock held under its one id,
// and a name outside it free.
func TestInspectMultiShowsEveryMemberUnderOneHolder(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(time.Minute), redlock.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	m, err := c.TryLockMulti(ctx, []string{"im-a", "im-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctx)
	infos, err := c.InspectMulti(ctx, []string{"im-b", "im-free", "im-a"})
	if err != nil || len(infos) != 3 {
		t.Fatalf("InspectMulti: %+v, %v", infos, err)
	}
	for _, i := range []int{0, 2} {
		if !infos[i].Held || infos[i].Holder != m.ID() || infos[i].Token != m.Token() {
			t.Errorf("member %s: %+v, want held by %s with token %d", infos[i].Name, infos[i], m.ID(), m.Token())
		}
	}
	if infos[1].Name != "im-free" || infos[1].Held {
		t.Errorf("a name outside the multi-lock: %+v", infos[1])
	}
	if _, err := c.InspectMulti(ctx, []string{"im-a", "im-a"}); !errors.Is(err, redlock.ErrDuplicateName) {
		t.Errorf("a name twice: %v, want ErrDuplicateName", err)
	}
}

// The family's Inspect, like the lock's, with a majority silent: typed
// ErrUnavailable and what the others said; a key of another type under a
// read-write lock's readers: ErrWrongType.
func TestInspectFamilyWithAMajoritySilentOrAWrongType(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()
	rw, _ := c.RWMutex("iw")
	s, _ := c.Semaphore("iw-sem", 2)
	for i, in := range cl.inspect {
		if err := in.Set(ctx, "redlock:{iw}:rw:readers", "not a set", 0).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	var wt *redlock.WrongTypeError
	if _, err := rw.Inspect(ctx); !errors.Is(err, redlock.ErrWrongType) || !errors.As(err, &wt) || wt.Key != "redlock:{iw}:rw:readers" {
		t.Errorf("readers of another type: %v, want ErrWrongType naming the key", err)
	}
	// The lock's Inspect too (it said ErrUnavailable before).
	for i, in := range cl.inspect {
		if err := in.RPush(ctx, "redlock:{iw-m}", "not a lock").Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	if _, err := c.Inspect(ctx, "iw-m"); !errors.Is(err, redlock.ErrWrongType) || !errors.As(err, &wt) || wt.Key != "redlock:{iw-m}" || wt.Type != "list" {
		t.Errorf("a lock key of another type: %v, want ErrWrongType naming the key", err)
	}
	resume := cl.pause(t, 0, 1, 2)
	defer resume()
	checks := map[string]func() (int, error){
		"rw":        func() (int, error) { i, err := rw.Inspect(ctx); return len(i.Nodes), err },
		"semaphore": func() (int, error) { i, err := s.Inspect(ctx); return len(i.Nodes), err },
		"multi": func() (int, error) {
			i, err := c.InspectMulti(ctx, []string{"iw-a", "iw-b"})
			return len(i), err
		},
	}
	for what, check := range checks {
		n, err := check()
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrUnavailable) || qe.Op != "inspect" {
			t.Errorf("%s with 3 of 5 paused: %v, want a QuorumError of ErrUnavailable", what, err)
		}
		if want := map[string]int{"rw": 5, "semaphore": 5, "multi": 2}[what]; n != want {
			t.Errorf("%s: %d entries with the error, want %d", what, n, want)
		}
	}
}

// The family's Inspect runs as the read-only user docs/operations.md gives
// for dashboards: it calls no command that writes.
func TestInspectFamilyAsAReadOnlyUser(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	watcher := cl.asWatcher(t)
	holder := cl.newClient(t)
	rw, _ := holder.RWMutex("ro-rw")
	r, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	s, _ := holder.Semaphore("ro-sem", 2)
	p, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	wrw, _ := watcher.RWMutex("ro-rw")
	if info, err := wrw.Inspect(ctx); err != nil || len(info.Readers) != 1 || info.Readers[0].Holder != r.ID() {
		t.Errorf("RWMutex.Inspect as a read-only user: %+v, %v", info, err)
	}
	ws, _ := watcher.Semaphore("ro-sem", 2)
	if info, err := ws.Inspect(ctx); err != nil || info.Free != 1 || info.Permits != 2 {
		t.Errorf("Semaphore.Inspect as a read-only user: %+v, %v", info, err)
	}
	if _, err := watcher.InspectMulti(ctx, []string{"ro-a", "ro-b"}); err != nil {
		t.Errorf("InspectMulti as a read-only user: %v", err)
	}
}
