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
	"github.com/redis/go-redis/v9"
)

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Issue 24's review of the lease engine's extraction (1e1f6c8) found two
// changes, each replayed here: failing at 1e1f6c8, passing before it and
// after the fix.

// The "extension failed" warning's err attribute is the error Extend
// returns: the *QuorumError's message, and errors.Is works on it.
func TestReviewExtendWarningCarriesTheQuorumError(t *testing.T) {
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

// An Extend that waits for this handle's Unlock (it raced it) returns
// after that Unlock has been observed, not before.
func TestReviewExtendWaitsForTheUnlocksObserver(t *testing.T) {
	cl := startCluster(t, 3)
	gate := newGate("extend", false)
	hooks := map[int]redis.Hook{0: gate, 1: gate, 2: gate}
	unlockSeen := make(chan struct{})
	hold := make(chan struct{})
	var order []string
	var mu sync.Mutex
	obs := redlock.ObserverFunc(func(_ context.Context, ev redlock.Event) {
		mu.Lock()
		order = append(order, ev.Op)
		mu.Unlock()
		if ev.Op == "unlock" {
			close(unlockSeen)
			<-hold
		}
	})
	c := cl.hookedOn(t, hooks, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(2*time.Second), redlock.WithObserver(obs))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "rvl-order")
	if err != nil {
		t.Fatal(err)
	}
	extended := make(chan error, 1)
	go func() { extended <- l.Extend(ctx) }()
	for range 3 {
		<-gate.arrived
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(ctx) }()
	<-unlockSeen
	close(gate.open)
	select {
	case err := <-extended:
		t.Errorf("Extend returned (%v) while its racing Unlock had not returned (observer still running)", err)
	case <-time.After(1 * time.Second):
	}
	close(hold)
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-extended:
		if !errors.Is(err, redlock.ErrReleased) {
			t.Errorf("Extend: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Extend never returned")
	}
	mu.Lock()
	t.Logf("observer order: %v", order)
	mu.Unlock()
}
