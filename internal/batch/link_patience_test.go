package batch_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/batch"
)

// heldUpThenBurst: one held-up call (BLPOP 2s, the package's own stand-in for
// a lost reply), then 20 concurrent calls with 150 ms timeouts. Returns how
// many were answered and how many NotSent.
func heldUpThenBurst(t *testing.T, l *batch.Link) (ok, notSent int32) {
	ctx := context.Background()
	held := make(chan error, 1)
	go func() { held <- l.Do(ctx, "blpop", "nobody-fills-this", 2).Err() }()
	time.Sleep(10 * time.Millisecond)
	var okN, nsN atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			// 150 ms: room for a busy machine, and still below the
			// patience the bug reached (four 50 ms timeouts).
			cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
			defer cancel()
			err := l.Do(cctx, "incr", "burst").Err()
			var ns *batch.NotSentError
			switch {
			case err == nil:
				okN.Add(1)
			case errors.As(err, &ns):
				nsN.Add(1)
			}
		})
	}
	wg.Wait()
	<-held
	l.Wait()
	return okN.Load(), nsN.Load()
}

func state(l *batch.Link) string {
	in, rtt, pat, q, armed := l.State()
	return "inFlight=" + itoa(in) + " rtt=" + rtt.String() + " patience=" + pat.String() + " queued=" + itoa(q) + " armed=" + map[bool]string{true: "true", false: "false"}[armed]
}

func itoa(i int) string { return strconv.Itoa(i) }

// Calls that time out do not teach the round-trip estimate (found by the
// adversarial review of dd1ff07): a node paused while one goroutine makes
// calls with the 50 ms node timeout, each a lone plain command and the
// latest send, used to raise the estimate about 1.875x a call to the
// timeout, and the patience to four times it; once the node answered
// again, one held-up call then held every later call until its ctx ended
// (0 of 20 answered, 20 NotSent).
func TestTimedOutCallsDoNotRaiseThePatience(t *testing.T) {
	p, c := startNode(t)
	l := batch.NewLink(c, 0)
	ctx := context.Background()
	for range 50 {
		_ = l.Do(ctx, "incr", "warm").Err()
	}
	t.Logf("warm: %s", state(l))
	if err := p.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_ = l.Do(cctx, "incr", "paused").Err()
		cancel()
		if i%5 == 4 {
			t.Logf("paused, after %d timed-out calls: %s", i+1, state(l))
		}
	}
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// The node is healthy: a few calls at loopback speed.
	for range 5 {
		start := time.Now()
		if err := l.Do(ctx, "incr", "healthy").Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("healthy call took %v; %s", time.Since(start), state(l))
	}
	time.Sleep(2 * time.Second) // idle: the estimate does not decay with time
	t.Logf("after 2 s idle: %s", state(l))
	ok, ns := heldUpThenBurst(t, l)
	t.Logf("after pause burst: %d answered, %d NotSent; %s", ok, ns, state(l))
	if ok != 20 {
		t.Errorf("after the node recovered, a held-up call held the calls after it: only %d of 20 answered (%d NotSent)", ok, ns)
	}
}
