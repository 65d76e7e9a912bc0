package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// pttls returns, per node, the lock key's remaining TTL, once every node's
// satisfies ok or after a few seconds: an operation returns at a majority,
// and the last node's call may still be in flight.
func (cl *cluster) pttls(t *testing.T, name string, ok func(time.Duration) bool) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(cl.inspect))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		all := true
		for i, c := range cl.inspect {
			d, err := c.PTTL(context.Background(), "redlock:{"+name+"}").Result()
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			out[i] = d
			all = all && ok(d)
		}
		if all || time.Now().After(deadline) {
			return out
		}
	}
}

func over50s(d time.Duration) bool { return d > 50*time.Second }

// maxTTLs returns, per node, the longest TTL in use it records, once
// every node records want or after a few seconds: an operation returns at
// a majority, and the last node's call may still be in flight.
func (cl *cluster) maxTTLs(t *testing.T, want time.Duration) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(cl.inspect))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		all := true
		for i, c := range cl.inspect {
			ms, err := c.Get(context.Background(), "redlock:fence:max-ttl").Int64()
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			out[i] = time.Duration(ms) * time.Millisecond
			all = all && out[i] == want
		}
		if all || time.Now().After(deadline) {
			return out
		}
	}
}

// Issue 23 §5: a TTL per call (For) on TryLock, Lock and Do, and Extend to
// a new TTL, shorter or longer; without For, Extend keeps the last one.
func TestForSetsTheTTLOfOneLock(t *testing.T) {
	cl := startCluster(t, 3)
	const clientTTL = 2 * time.Second
	c := cl.newClient(t, redlock.WithTTL(clientTTL), redlock.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	start := time.Now()
	l, err := c.TryLock(ctx, "for-try", redlock.For(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if left := l.Until().Sub(start); left <= 50*time.Second || left > time.Minute {
		t.Errorf("TryLock For(1m): Until is %v after the call, want within (50s, 1m]", left)
	}
	for i, d := range cl.pttls(t, "for-try", over50s) {
		if d <= 50*time.Second {
			t.Errorf("node %d: PTTL %v after TryLock For(1m)", i, d)
		}
	}
	// Extend shortens to For's TTL, and keeps it without For.
	if err := l.Extend(ctx, redlock.For(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(l.Until()); left > 5*time.Second {
		t.Errorf("Extend For(5s): Until is %v away", left)
	}
	for _, extend := range []func() error{
		func() error { return l.Extend(ctx, redlock.For(5*time.Second)) },
		func() error { return l.Extend(ctx) },
	} {
		if err := extend(); err != nil {
			t.Fatal(err)
		}
		to5s := func(d time.Duration) bool { return d <= 5*time.Second && d > clientTTL }
		for i, d := range cl.pttls(t, "for-try", to5s) {
			if !to5s(d) {
				t.Errorf("node %d: PTTL %v after an Extend to 5s, want (2s, 5s]", i, d)
			}
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	lk, err := c.Lock(ctx, "for-lock", redlock.For(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range cl.pttls(t, "for-lock", over50s) {
		if d <= 50*time.Second {
			t.Errorf("node %d: PTTL %v after Lock For(1m)", i, d)
		}
	}
	lk.Unlock(ctx)

	err = c.Do(ctx, "for-do", func(ctx context.Context, l *redlock.Lock) error {
		for i, d := range cl.pttls(t, "for-do", over50s) {
			if d <= 50*time.Second {
				t.Errorf("node %d: PTTL %v in Do For(1m)", i, d)
			}
		}
		return nil
	}, redlock.For(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
}

// For is checked as WithTTL is, before anything is sent, and a bad For on
// Extend leaves the lock as it was.
func TestForIsCheckedAsWithTTL(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(2*time.Second), redlock.WithRetention(time.Hour))
	ctx := context.Background()
	cases := []struct {
		opt  redlock.LockOption
		want error
	}{
		{redlock.For(redlock.MinTTL - 1), redlock.ErrTTLTooShort},
		{redlock.For(50 * time.Millisecond), redlock.ErrNoValidityBudget}, // two rounds of 50ms
		{redlock.For(redlock.MaxTTL + 1), redlock.ErrTTLTooLong},
		{redlock.For(time.Hour), redlock.ErrRetentionTooShort}, // needs 2h + retention
		{nil, redlock.ErrNilOption},
	}
	for _, tc := range cases {
		if _, err := c.TryLock(ctx, "bad-for", tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("TryLock: %v, want %v", err, tc.want)
		}
		if _, err := c.Lock(ctx, "bad-for", tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("Lock: %v, want %v", err, tc.want)
		}
		err := c.Do(ctx, "bad-for", func(context.Context, *redlock.Lock) error { return nil }, tc.opt)
		if !errors.Is(err, tc.want) {
			t.Errorf("Do: %v, want %v", err, tc.want)
		}
	}
	for i, v := range cl.holders(t, "bad-for") {
		if v != "" {
			t.Errorf("node %d holds %q after refused calls", i, v)
		}
	}
	l, err := c.TryLock(ctx, "bad-for")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	until := l.Until()
	for _, tc := range cases {
		if err := l.Extend(ctx, tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("Extend: %v, want %v", err, tc.want)
		}
	}
	if l.Until() != until {
		t.Errorf("refused Extends moved Until")
	}
}

// Safety (fenced): every node records the longest TTL in use, and a
// Repair of a node that lost its data waits that long. A lock taken For a
// TTL longer than the client's, and a lock extended For a longer TTL,
// must be recorded there too: a repair that waited only the client's TTL
// would let a second holder in while the long lock is still valid.
func TestForIsRecordedAsTheLongestTTLInUse(t *testing.T) {
	cl := startCluster(t, 5)
	opts := []redlock.Option{redlock.WithTTL(2 * time.Second), redlock.WithNodeTimeout(200 * time.Millisecond)}
	c := cl.newClient(t, opts...)
	ctx := context.Background()
	a, err := c.TryLock(ctx, "long-acquired", redlock.For(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Unlock(ctx)
	for i, d := range cl.maxTTLs(t, time.Minute) {
		if d != time.Minute {
			t.Errorf("node %d records %v after a lock For(1m), want 1m", i, d)
		}
	}
	b, err := c.TryLock(ctx, "long-extended")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	if err := b.Extend(ctx, redlock.For(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for i, d := range cl.maxTTLs(t, 2*time.Minute) {
		if d != 2*time.Minute {
			t.Errorf("node %d records %v after an Extend For(2m), want 2m", i, d)
		}
	}

	cl.restartEmpty(t, 0)
	err = cl.newClient(t, opts...).Repair(ctx, 0, redlock.RepairAdopting())
	var soon *redlock.RepairTooSoonError
	if !errors.As(err, &soon) {
		t.Fatalf("Repair right after the restart: %v, want a RepairTooSoonError", err)
	}
	if soon.Wait <= time.Minute || soon.Wait > 2*time.Minute {
		t.Errorf("Repair says wait %v, want within (1m, 2m]: the extended lock lasts 2m", soon.Wait)
	}
}

// A rollback that cannot tell whether its acquisition reached the node
// leaves a release marker, so that the acquisition cannot land later. For
// a lock taken For longer than the client's TTL the marker lasts ten of
// the lock's TTLs, not the client's: a late SET would hold the name for
// the lock's own TTL.
func TestForLengthensTheReleaseMarker(t *testing.T) {
	cl := startCluster(t, 3)
	const clientTTL = time.Second
	c := cl.actor(t, []*faultHook{cutScript("acquire"), nil, nil}, redlock.WithTTL(clientTTL))
	cl.holdAsStranger(t, "marked", 1, 2)
	ctx := context.Background()
	if l, err := c.TryLock(ctx, "marked", redlock.For(time.Minute)); err == nil {
		l.Unlock(ctx)
		t.Fatal("TryLock won against a stranger holding two of three nodes")
	}
	var marker time.Duration
	for deadline := time.Now().Add(5 * time.Second); marker <= 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		keys, err := cl.inspect[0].Keys(ctx, "redlock:{marked}:released:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 1 {
			marker = cl.inspect[0].PTTL(ctx, keys[0]).Val()
		}
	}
	if marker <= 10*clientTTL {
		t.Errorf("release marker's TTL %v, want over 10 × the client's TTL (the lock's is a minute)", marker)
	}
}

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }

func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The "extension failed" warning's err attribute is the error Extend
// returns: the *QuorumError's message, and errors.Is works on it.
// Origin: the adversarial review of the lease engine's move to internal/lease.
func TestExtendWarningCarriesTheQuorumError(t *testing.T) {
	cl := startCluster(t, 3)
	var buf syncBuf
	var logged []any
	var mu sync.Mutex
	h := slog.NewTextHandler(&buf, nil)
	c := cl.newClient(t, redlock.WithLogger(slog.New(recHandler{h, &mu, &logged})))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "rvl-log")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.clients {
		n.Del(ctx, "redlock:{rvl-log}")
	}
	err = l.Extend(ctx)
	if !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("Extend: %v", err)
	}
	t.Logf("log: %s", buf.String())
	mu.Lock()
	defer mu.Unlock()
	var qe *redlock.QuorumError
	found := false
	for _, v := range logged {
		if e, ok := v.(error); ok {
			if e.Error() != err.Error() {
				t.Errorf("logged err %q (%T), returned %q", e.Error(), e, err.Error())
			}
			if errors.As(e, &qe) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no logged err attribute is a *QuorumError: %#v", logged)
	}
}

type recHandler struct {
	slog.Handler
	mu  *sync.Mutex
	out *[]any
}

func (r recHandler) Handle(ctx context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			r.mu.Lock()
			*r.out = append(*r.out, a.Value.Any())
			r.mu.Unlock()
		}
		return true
	})
	return r.Handler.Handle(ctx, rec)
}
