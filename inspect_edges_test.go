package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// keyState is every key on a node with its DUMP payload (TTL aside).
func (cl *cluster) keyState(t *testing.T) []map[string]string {
	t.Helper()
	ctx := context.Background()
	var out []map[string]string
	for i, in := range cl.inspect {
		keys, err := in.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		sort.Strings(keys)
		m := map[string]string{}
		for _, k := range keys {
			d, _ := in.Dump(ctx, k).Result()
			m[k] = d
		}
		out = append(out, m)
	}
	return out
}

// Every family Inspect, fenced and not, with a key prefix, in contended
// states (a writer queued, a reader's watch mark, a semaphore line): no key
// is added, removed or changed.
func TestInspectWritesNothingInContendedStates(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	for _, fenced := range []bool{true, false} {
		opts := []redlock.Option{redlock.WithTTL(20 * time.Second), redlock.WithKeyPrefix(fmt.Sprintf("app%v", fenced))}
		if !fenced {
			opts = append(opts, redlock.WithoutFencing())
		}
		c := cl.newClient(t, opts...)
		if fenced {
			if err := c.Provision(ctx); err != nil {
				t.Fatal(err)
			}
		}
		rw, _ := c.RWMutex("t")
		r, err := rw.TryRLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		go func() { // a writer queues behind the reader
			if w, err := rw.Lock(wctx); err == nil {
				w.Unlock(context.Background())
			}
		}()
		waitFor(t, "writer queued", func() bool { i, err := rw.Inspect(ctx); return err == nil && i.WritersQueued == 1 })
		if _, err := rw.TryRLock(ctx); err == nil { // refused: leaves the watch mark
			t.Fatal("a reader got in past a queued writer")
		}
		s, _ := c.Semaphore("s", 2)
		p, err := s.TryAcquireN(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if q, err := s.Acquire(wctx); err == nil {
				q.Release(context.Background())
			}
		}()
		waitFor(t, "waiter in line", func() bool { i, err := s.Inspect(ctx); return err == nil && i.Waiting == 1 })
		m, err := c.TryLockMulti(ctx, []string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		// As the read-only watcher of docs/operations.md (its key pattern
		// widened to this prefix): Redis refuses any write command.
		var wnodes []redis.UniversalClient
		for i, in := range cl.inspect {
			acl := append([]any{}, watcherACL...)
			acl = append(acl, fmt.Sprintf("~app%v:*", fenced))
			if err := in.Do(ctx, acl...).Err(); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			wn := redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr(), Username: "watcher", Password: "secret"})
			defer wn.Close()
			wnodes = append(wnodes, wn)
		}
		wc, err := redlock.New(wnodes, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer wc.Close()
		wrw, _ := wc.RWMutex("t")
		ws, _ := wc.Semaphore("s", 2)
		if info, err := wrw.Inspect(ctx); err != nil || info.WritersQueued != 1 || len(info.Readers) != 1 {
			t.Errorf("fenced=%v watcher rw: %+v %v", fenced, info, err)
		}
		if info, err := ws.Inspect(ctx); err != nil || info.Waiting != 1 || info.Free != 0 {
			t.Errorf("fenced=%v watcher sem: %+v %v", fenced, info, err)
		}
		if _, err := wc.InspectMulti(ctx, []string{"a", "b"}); err != nil {
			t.Errorf("fenced=%v watcher multi: %v", fenced, err)
		}
		for _, name := range []string{"bad", "t"} { // wrong types as the watcher: TYPE is allowed
			for _, in := range cl.inspect {
				in.RPush(ctx, fmt.Sprintf("app%v:{%s}", fenced, name), "x")
			}
		}
		wbad, _ := wc.RWMutex("bad")
		for _, in := range cl.inspect {
			in.RPush(ctx, fmt.Sprintf("app%v:{bad}:rw", fenced), "x")
		}
		if _, err := wbad.Inspect(ctx); !errors.Is(err, redlock.ErrWrongType) {
			t.Errorf("fenced=%v watcher rw wrong type: %v", fenced, err)
		}
		if _, err := wc.Inspect(ctx, "t"); !errors.Is(err, redlock.ErrWrongType) {
			t.Errorf("fenced=%v watcher lock wrong type: %v", fenced, err)
		}
		before := cl.keyState(t)
		for k := 0; k < 5; k++ {
			if info, err := rw.Inspect(ctx); err != nil || len(info.Readers) != 1 || info.Readers[0].Holder != r.ID() || info.WritersQueued != 1 {
				t.Errorf("fenced=%v rw: %+v %v", fenced, info, err)
			}
			if info, err := s.Inspect(ctx); err != nil || len(info.Holders) != 1 || info.Holders[0].Holder != p.ID() || info.Free != 0 || info.Waiting != 1 {
				t.Errorf("fenced=%v sem: %+v %v", fenced, info, err)
			} else if fenced && info.Holders[0].Token != p.Token() {
				t.Errorf("sem token %d want %d", info.Holders[0].Token, p.Token())
			}
			if infos, err := c.InspectMulti(ctx, []string{"b", "a", "c"}); err != nil || !infos[0].Held || infos[0].Holder != m.ID() || infos[1].Holder != m.ID() || infos[2].Held {
				t.Errorf("fenced=%v multi: %+v %v", fenced, infos, err)
			}
			if info, err := c.Inspect(ctx, "a"); err != nil || info.Holder != m.ID() {
				t.Errorf("fenced=%v inspect: %+v %v", fenced, info, err)
			}
		}
		after := cl.keyState(t)
		for i := range before {
			if fmt.Sprint(before[i]) != fmt.Sprint(after[i]) {
				var changed []string
				for k, v := range after[i] {
					if before[i][k] != v {
						changed = append(changed, k)
					}
				}
				t.Logf("fenced=%v node %d: keys changed while inspecting (live waiters refresh): %v", fenced, i, changed)
			}
		}
		r.Unlock(ctx)
		m.Unlock(ctx)
		p.Release(ctx)
		cancel()
		time.Sleep(200 * time.Millisecond)
	}
}

// Wrong-typed keys: every key each family Inspect reads, on every node.
func TestInspectNamesEveryKeyOfAnotherType(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(300*time.Millisecond))
	set := func(key string) func() {
		for i, in := range cl.inspect {
			if err := in.SAdd(ctx, key, "x").Err(); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
		}
		return func() {
			for _, in := range cl.inspect {
				in.Del(ctx, key)
			}
		}
	}
	type probe struct {
		key   string
		check func() error
	}
	rw, _ := c.RWMutex("wt")
	s, _ := c.Semaphore("wts", 2)
	probes := []probe{
		{"redlock:{wt}:rw", func() error { _, err := rw.Inspect(ctx); return err }},
		{"redlock:{wt}:rw:readers", func() error { _, err := rw.Inspect(ctx); return err }},
		{"redlock:{wt}:rw:queue:seen", func() error { _, err := rw.Inspect(ctx); return err }},
		{"redlock:{wt}:rw:fence:high", func() error { _, err := rw.Inspect(ctx); return err }},
		{"redlock:{wt}:rw:fence:read", func() error { _, err := rw.Inspect(ctx); return err }},
		{"redlock:{wts}:permits", func() error { _, err := s.Inspect(ctx); return err }},
		{"redlock:{wts}:line:queue:seen", func() error { _, err := s.Inspect(ctx); return err }},
		{"redlock:{wts#1}", func() error { _, err := s.Inspect(ctx); return err }},
		{"redlock:{wts#1}:fence:high", func() error { _, err := s.Inspect(ctx); return err }},
		{"redlock:{wm-b}", func() error { _, err := c.InspectMulti(ctx, []string{"wm-a", "wm-b"}); return err }},
		{"redlock:{wm-b}:fence:high", func() error { _, err := c.InspectMulti(ctx, []string{"wm-a", "wm-b"}); return err }},
	}
	for _, p := range probes {
		undo := set(p.key)
		err := p.check()
		var wt *redlock.WrongTypeError
		switch {
		case err == nil:
			t.Errorf("key %s of another type on every node: Inspect says nil error, want ErrWrongType naming it", p.key)
		case !errors.Is(err, redlock.ErrWrongType):
			t.Errorf("key %s: %v, want ErrWrongType", p.key, err)
		case !errors.As(err, &wt) || wt.Key != p.key:
			t.Errorf("key %s: %v, names %+v", p.key, err, wt)
		default:
			t.Logf("ok key %s: %v", p.key, err)
		}
		undo()
	}
	// What the primitives themselves say with those keys wrong-typed.
	undo := set("redlock:{wt}:rw:queue:seen")
	_, err := rw.TryRLock(ctx)
	t.Logf("TryRLock with the writers' SEEN a set: %v (ErrWrongType: %v)", err, errors.Is(err, redlock.ErrWrongType))
	undo()
	undo = set("redlock:{wt}:rw:fence:high")
	_, err = rw.TryLock(ctx)
	t.Logf("RWMutex.TryLock with H a set: %v (ErrWrongType: %v)", err, errors.Is(err, redlock.ErrWrongType))
	undo()
	undo = set("redlock:{wm-b}:fence:high")
	_, err = c.TryLockMulti(ctx, []string{"wm-a", "wm-b"})
	t.Logf("TryLockMulti with H of a member a set: %v (ErrWrongType: %v)", err, errors.Is(err, redlock.ErrWrongType))
	undo()
	undo = set("redlock:{wts}:line:queue:seen")
	_, err = s.TryAcquire(ctx)
	t.Logf("TryAcquire with the line's SEEN a set: %v (ErrWrongType: %v)", err, errors.Is(err, redlock.ErrWrongType))
	undo()
}

// Readers on fewer than a majority, expired readers, readers of the same
// id on a majority with different times.
func TestInspectListsOnlyReadersAMajorityHolds(t *testing.T) {
	cl := startCluster(t, 5)
	ctx := context.Background()
	c := cl.newClient(t, redlock.WithTTL(5*time.Second))
	rw, _ := c.RWMutex("rm")
	key := "redlock:{rm}:rw:readers"
	now := time.Now().UnixMilli()
	add := func(member string, leftMs int64, nodes ...int) {
		for _, i := range nodes {
			// node clock is the same host clock
			if err := cl.inspect[i].ZAdd(ctx, key, redis.Z{Score: float64(now + leftMs), Member: member}).Err(); err != nil {
				t.Fatal(err)
			}
			cl.inspect[i].PExpire(ctx, key, time.Minute)
		}
	}
	add("minority", 30000, 0, 1)
	add("expired", -10, 0, 1, 2, 3, 4)
	add("majority", 30000, 0, 1, 2)
	add("mixed", 60000, 0, 1)
	add("mixed", 1000, 2, 3)
	info, err := rw.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Duration{}
	for _, r := range info.Readers {
		got[r.Holder] = r.Remaining
	}
	t.Logf("readers: %v", got)
	if _, ok := got["minority"]; ok {
		t.Error("a reader on 2 of 5 listed")
	}
	if _, ok := got["expired"]; ok {
		t.Error("an expired reader listed")
	}
	if got["majority"] <= 25*time.Second || got["majority"] > 30*time.Second {
		t.Errorf("majority reader remaining %v", got["majority"])
	}
	if got["mixed"] > time.Second {
		t.Errorf("mixed reader (60s on 2, 1s on 2): remaining %v, want <= 1s", got["mixed"])
	}
}

// A cancelled context, and a deadline shorter than the node timeout with a
// majority paused: the family's Inspect returns by the deadline with the
// context's error visible.
func TestInspectEndsAtItsCtx(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithNodeTimeout(3*time.Second))
	rw, _ := c.RWMutex("cx")
	s, _ := c.Semaphore("cxs", 3)
	calls := map[string]func(ctx context.Context) error{
		"lock":  func(ctx context.Context) error { _, err := c.Inspect(ctx, "cx"); return err },
		"rw":    func(ctx context.Context) error { _, err := rw.Inspect(ctx); return err },
		"sem":   func(ctx context.Context) error { _, err := s.Inspect(ctx); return err },
		"multi": func(ctx context.Context) error { _, err := c.InspectMulti(ctx, []string{"x", "y"}); return err },
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for what, f := range calls {
		start := time.Now()
		err := f(cancelled)
		t.Logf("%s cancelled: %v in %v (Is Canceled %v, Unavailable %v)", what, err, time.Since(start), errors.Is(err, context.Canceled), errors.Is(err, redlock.ErrUnavailable))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled ctx: %v, want context.Canceled visible", what, err)
		}
	}
	resume := cl.pause(t, 0, 1)
	defer resume()
	for what, f := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		start := time.Now()
		err := f(ctx)
		took := time.Since(start)
		cancel()
		t.Logf("%s 2/3 paused, 150ms deadline: %v in %v", what, err, took)
		if took > time.Second {
			t.Errorf("%s: took %v past a 150ms deadline", what, took)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, redlock.ErrUnavailable) {
			t.Errorf("%s: %v, want DeadlineExceeded and ErrUnavailable", what, err)
		}
	}
}

// ID of a downgraded hold and of a reentrant hold is what Inspect shows.
func TestInspectShowsTheIDsOfDerivedHolds(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t)
	rw, _ := c.RWMutex("dg")
	w, err := rw.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	if info, err := rw.Inspect(ctx); err != nil || info.Write.Holder != w.ID() || info.Write.Token != w.Token() {
		t.Errorf("writer: %+v, %v, want %s", info.Write, err, w.ID())
	}
	if err := w.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := rw.Inspect(ctx); err != nil || info.Write.Held || len(info.Readers) != 1 || info.Readers[0].Holder != w.ID() {
		t.Errorf("downgraded: %+v, %v, want reader %s", info, err, w.ID())
	}
}
