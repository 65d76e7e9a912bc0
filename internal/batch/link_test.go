package batch_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/batch"
	"github.com/quorumlock/redlock/internal/luascript"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// busy is a script that keeps its node busy for about ARGV[1] ms (a loop
// of 100,000 steps a millisecond, about right on these machines): the calls
// in flight while the test queues the next batch behind them. It reads no
// clock: Valkey gives a script the time it began at throughout.
const busy = `local n = 0
for i = 1, tonumber(ARGV[1]) * 100000 do n = n + i % 7 end
return 1`

// startNode starts one redis-server and returns a client to it, and the
// process for pausing. The client honours its calls' deadlines
// (ContextTimeoutEnabled), as the library's docs ask: a lone call goes out
// as a plain command, and ends at its ctx only if the client does.
func startNode(t *testing.T) (*node.Process, *redis.Client) {
	t.Helper()
	p, err := node.StartProcess(context.Background(), node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() {
		c.Close()
		p.Close()
	})
	return p, c
}

// behindBusy fills l's places in flight with busy calls of ms each (the
// node runs them one after another), each made once the one before is
// overdue so that it goes beside it, and returns once they are in flight,
// with a channel closed when they have all returned: the calls made
// meanwhile queue for a batch.
func behindBusy(t *testing.T, l *batch.Link, ms int) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range batch.MaxInFlight {
		wg.Go(func() {
			if err := l.Do(context.Background(), "eval", busy, 0, ms).Err(); err != nil {
				t.Errorf("busy call: %v", err)
			}
		})
		time.Sleep(5 * batch.MinPatience) // it reaches the node and is overdue
	}
	go func() { wg.Wait(); close(done) }()
	time.Sleep(20 * time.Millisecond)
	return done
}

// waitQueued waits, for a second at most, until ok holds of the calls l
// has queued.
func waitQueued(t *testing.T, l *batch.Link, ok func(int) bool) {
	t.Helper()
	for range 10000 {
		if ok(l.Queued()) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("still %d calls queued after a second", l.Queued())
}

// Calls made while the link is busy go out as one pipeline, and each gets
// its own reply: a script error in the middle fails only its caller.
func TestEachCallInABatchGetsItsOwnReply(t *testing.T) {
	_, c := startNode(t)
	l := batch.NewLink(c, 0)
	ctx := context.Background()
	inFlight := behindBusy(t, l, 200)
	const n = 30
	var wg sync.WaitGroup
	errs := make([]error, n)
	vals := make([]any, n)
	for i := range n {
		wg.Go(func() {
			args := []any{"eval", "return ARGV[1]", 0, strconv.Itoa(i)}
			if i == n/2 {
				args = []any{"eval", "return redis.error_reply('ERR call " + strconv.Itoa(i) + " fails')", 0}
			}
			vals[i], errs[i] = l.Do(ctx, args...).Result()
		})
	}
	wg.Wait()
	<-inFlight
	for i := range n {
		switch {
		case i == n/2:
			if errs[i] == nil || errs[i].Error() != "ERR call "+strconv.Itoa(i)+" fails" {
				t.Errorf("call %d: %v, want its own script error", i, errs[i])
			}
		case errs[i] != nil || vals[i] != strconv.Itoa(i):
			t.Errorf("call %d: %v %v, want its own reply %d", i, vals[i], errs[i], i)
		}
	}
}

// A call whose ctx ends while it waits for its batch is never sent; one
// whose ctx ends once its batch has left returns at once with ctx's error,
// and its command still runs on the node (its reply is dropped).
func TestACancelledCallIsNotSentUnlessItsBatchLeft(t *testing.T) {
	_, c := startNode(t)
	l := batch.NewLink(c, 0)
	ctx := context.Background()
	inFlight := behindBusy(t, l, 300)
	queued, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- l.Do(queued, "incr", "queued").Err() }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued call cancelled: %v, want context.Canceled", err)
	}
	<-inFlight
	// In flight: a busy call and another in one batch, which leaves when
	// the first busy call ahead of it returns, and is cancelled as soon as
	// it has left.
	inFlight = behindBusy(t, l, 100)
	sent, cancelSent := context.WithCancel(ctx)
	go func() { got <- l.Do(sent, "eval", busy, 0, 300).Err() }()
	go func() { _ = l.Do(ctx, "incr", "sent").Err() }()
	waitQueued(t, l, func(n int) bool { return n == 2 })
	waitQueued(t, l, func(n int) bool { return n == 0 }) // the batch left
	start := time.Now()
	cancelSent()
	if err := <-got; !errors.Is(err, context.Canceled) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("sent call cancelled: %v after %v, want context.Canceled at once", err, time.Since(start))
	}
	<-inFlight
	l.Wait()
	if n, _ := c.Get(ctx, "queued").Int(); n != 0 {
		t.Errorf("the call cancelled before its batch left ran on the node (queued = %d)", n)
	}
	if n, _ := c.Get(ctx, "sent").Int(); n != 1 {
		t.Errorf("the batch that left did not run whole (sent = %d)", n)
	}
}

// A call held up without holding its node (here a BLPOP that waits two
// seconds for a list nobody fills) does not hold the calls after it: once
// it is overdue they go out beside it, in batches, and all of them are
// answered while it is still out.
func TestAHeldUpCallDoesNotHoldTheCallsAfterIt(t *testing.T) {
	_, c := startNode(t)
	l := batch.NewLink(c, 0)
	ctx := context.Background()
	heldUp := make(chan error, 1)
	go func() { heldUp <- l.Do(ctx, "blpop", "nobody-fills-this", 2).Err() }()
	time.Sleep(20 * time.Millisecond) // it is out, and overdue
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if err := l.Do(ctx, "incr", "k").Err(); err != nil {
					t.Errorf("a call after the held-up one: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-heldUp:
		t.Fatalf("the calls after a held-up call waited for it (it returned %v first)", err)
	default:
	}
	if n, _ := c.Get(ctx, "k").Int(); n != 400 {
		t.Fatalf("k = %d after 400 INCRs", n)
	}
	if err := <-heldUp; !errors.Is(err, redis.Nil) {
		t.Fatalf("the held-up call: %v, want redis.Nil at its timeout", err)
	}
	l.Wait()
}

// A paused node with 500 calls batched to it: each call ends at its own
// timeout, and another node's link goes on meanwhile.
func TestAPausedNodeHoldsOnlyItsOwnCalls(t *testing.T) {
	p, c := startNode(t)
	_, other := startNode(t)
	l, lo := batch.NewLink(c, 0), batch.NewLink(other, 0)
	ctx := context.Background()
	if err := p.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 500
	var late atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			// Timeouts from 100 to 349 ms: each must end at its own.
			d := 100*time.Millisecond + time.Duration(i%250)*time.Millisecond
			cctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			err := l.Do(cctx, "incr", "paused").Err()
			// The call sent as a plain command ends with go-redis's i/o
			// timeout at its deadline; the queued ones with ctx's error.
			var ne net.Error
			timedOut := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
			if !timedOut || time.Since(start) > d+250*time.Millisecond {
				late.Add(1)
				t.Errorf("call %d (timeout %v): %v after %v", i, d, err, time.Since(start))
			}
		})
	}
	for i := range 200 {
		if err := lo.Do(ctx, "incr", "live").Err(); err != nil {
			t.Fatalf("the other node's call %d: %v", i, err)
		}
	}
	wg.Wait()
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	l.Wait()
	if late.Load() > 0 {
		t.Fatalf("%d of %d calls to the paused node did not end at their own timeout", late.Load(), n)
	}
}

// Wait returns once the batches in flight have ended, so a client that
// closes leaves no goroutine behind (goleak checks at the end).
func TestWaitOutlastsTheBatchesInFlight(t *testing.T) {
	_, c := startNode(t)
	l := batch.NewLink(c, 0)
	ctx := context.Background()
	inFlight := behindBusy(t, l, 100)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { _ = l.Do(ctx, "incr", "k").Err() })
	}
	<-inFlight
	wg.Wait()
	l.Wait()
	if n, _ := c.Get(ctx, "k").Int(); n != 50 {
		t.Fatalf("k = %d after 50 batched INCRs", n)
	}
}

// NOSCRIPT inside a batch (the node restarted, or its scripts were
// flushed) falls back to EVAL per call, in a later batch: the batch is not
// sent again, and every call gets its reply.
func TestNoScriptInABatchFallsBackPerCall(t *testing.T) {
	_, c := startNode(t)
	l := batch.NewLink(c, 0)
	ctx := context.Background()
	s := luascript.New("return ARGV[1]")
	if v, err := nodescript.NewCall(s, nil, "learn").Run(ctx, l).Text(); err != nil || v != "learn" {
		t.Fatalf("first run: %q %v", v, err)
	}
	if s.Hash() == "" {
		t.Fatal("the digest was not learnt: the calls below would not go out as EVALSHA")
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	inFlight := behindBusy(t, l, 100)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			want := strconv.Itoa(i)
			if v, err := nodescript.NewCall(s, nil, want).Run(ctx, l).Text(); err != nil || v != want {
				t.Errorf("call %d after SCRIPT FLUSH: %q %v", i, v, err)
			}
		})
	}
	wg.Wait()
	<-inFlight
}
