package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// recorder keeps every event, in order.
type recorder struct {
	mu     sync.Mutex
	events []redlock.Event
}

func (r *recorder) Observe(_ context.Context, ev redlock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) take() []redlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.events
	r.events = nil
	return evs
}

func outcomes(nodes []redlock.NodeResult) []redlock.Outcome {
	out := make([]redlock.Outcome, len(nodes))
	for i, n := range nodes {
		out[i] = n.Outcome
	}
	return out
}

func TestObserverSeesEveryOperationWithItsOutcomeVector(t *testing.T) {
	cl := startCluster(t, 5)
	rec := &recorder{}
	c := cl.newClient(t, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(300*time.Millisecond),
		redlock.WithObserver(rec))
	ctx := context.Background()

	// Node 4 is held by a stranger, node 3 paused: the vector must say so.
	cl.holdAsStranger(t, "obs", 4)
	resume := cl.pause(t, 3)
	l, err := c.TryLock(ctx, "obs")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	resume()

	evs := rec.take()
	if len(evs) != 3 {
		t.Fatalf("want 3 events (lock, extend, unlock), got %d: %+v", len(evs), evs)
	}
	lock, ext, unl := evs[0], evs[1], evs[2]
	if lock.Op != "lock" || ext.Op != "extend" || unl.Op != "unlock" {
		t.Fatalf("ops: %q %q %q", lock.Op, ext.Op, unl.Op)
	}
	for _, ev := range evs {
		if ev.Name != "obs" || ev.Err != nil || ev.Token != l.Token() || ev.Start.IsZero() || ev.Elapsed <= 0 {
			t.Errorf("%s event: %+v", ev.Op, ev)
		}
		if len(ev.Nodes) != 5 {
			t.Fatalf("%s event: %d node results", ev.Op, len(ev.Nodes))
		}
		for i, n := range ev.Nodes {
			if n.Node != i {
				t.Errorf("%s: nodes[%d].Node = %d", ev.Op, i, n.Node)
			}
		}
	}
	got := outcomes(lock.Nodes)
	for i := range 3 {
		if got[i] != redlock.NodeGranted || lock.Nodes[i].Latency <= 0 {
			t.Errorf("lock node %d: %v after %v", i, got[i], lock.Nodes[i].Latency)
		}
	}
	// Decided at three grants: node 4's refusal may not have arrived yet.
	if got[4] != redlock.NodeRefused && got[4] != redlock.NodeNoReply {
		t.Errorf("lock node 4 (stranger): %v", got[4])
	}
	if got[3] == redlock.NodeGranted || got[3] == redlock.NodeRefused {
		t.Errorf("lock node 3 (paused): %v", got[3])
	}
	committed := 0
	for _, o := range outcomes(lock.Commit) {
		if o == redlock.NodeGranted {
			committed++
		}
	}
	if len(lock.Commit) != 5 || committed < 3 {
		t.Errorf("fenced lock: commit round %v", outcomes(lock.Commit))
	}
	if lock.Validity <= 0 || lock.Validity > 2*time.Second || ext.Validity <= 0 {
		t.Errorf("validity: lock %v, extend %v", lock.Validity, ext.Validity)
	}
	if unl.Validity != 0 {
		t.Errorf("unlock validity %v", unl.Validity)
	}
}

func TestObserverSeesFailuresAndEachAttempt(t *testing.T) {
	cl := startCluster(t, 3)
	rec := &recorder{}
	c := cl.newClient(t, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(100*time.Millisecond),
		redlock.WithRetryDelay(time.Millisecond, 2*time.Millisecond), redlock.WithObserver(rec))
	cl.holdAsStranger(t, "busy", 0, 1, 2)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Lock(ctx, "busy")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v", err)
	}
	evs := rec.take()
	if len(evs) < 2 {
		t.Fatalf("want one event per attempt, got %d", len(evs))
	}
	// The attempts the deadline cut come last: none (it passed between
	// attempts), one, or two under load (an attempt decided as the deadline
	// passed, and one that ended at once).
	cut := len(evs)
	for cut > 1 && errors.Is(evs[cut-1].Err, context.DeadlineExceeded) {
		cut--
	}
	for _, ev := range evs[:cut] {
		if !errors.Is(ev.Err, redlock.ErrLocked) || ev.Validity != 0 || ev.Token != 0 || ev.Commit != nil {
			t.Errorf("attempt: %+v", ev)
		}
		// Decided once two of three refused: the third may not have answered yet.
		refused := 0
		for _, o := range outcomes(ev.Nodes) {
			switch o {
			case redlock.NodeRefused:
				refused++
			case redlock.NodeNoReply:
			default:
				t.Errorf("attempt outcomes %v", outcomes(ev.Nodes))
			}
		}
		if refused < 2 {
			t.Errorf("attempt outcomes %v: decided without a refusing majority", outcomes(ev.Nodes))
		}
	}
	if c.Close(); true {
		_, err := c.TryLock(context.Background(), "busy")
		evs := rec.take()
		if len(evs) != 1 || !errors.Is(evs[0].Err, redlock.ErrClosed) || !errors.Is(err, redlock.ErrClosed) {
			t.Errorf("closed client: err %v, events %+v", err, evs)
		}
	}
}

// The logger hears of failed extensions and lost locks; the success path
// logs nothing.
func TestLoggerReportsFailedExtensionsOnly(t *testing.T) {
	cl := startCluster(t, 3)
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c := cl.newClient(t, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(100*time.Millisecond),
		redlock.WithLogger(log))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "logged")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "" {
		t.Fatalf("success path logged:\n%s", buf.String())
	}

	l, err = c.TryLock(ctx, "logged")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range cl.inspect {
		in.Del(ctx, "redlock:{logged}")
	}
	if err := l.Extend(ctx); !errors.Is(err, redlock.ErrExpired) {
		t.Fatalf("Extend of a deleted lock: %v", err)
	}
	if out := buf.String(); !strings.Contains(out, "extension failed") || !strings.Contains(out, "lock=logged") {
		t.Fatalf("log after a failed extension:\n%s", out)
	}
	l.Unlock(ctx)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An Extend that waits for this handle's Unlock (it raced it) returns
// after that Unlock has been observed, not before.
// Origin: the adversarial review of the lease engine's move to internal/lease.
func TestExtendWaitsForTheUnlocksObserver(t *testing.T) {
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
