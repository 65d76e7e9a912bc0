package round

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/batch"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// The tests of the calls that ride their links' batches (batched.go), on
// real nodes whose go-redis clients keep their defaults but for a longer
// ReadTimeout: a call in flight then ends at its ReadTimeout, not at its ctx, so only the engine can end
// it at the round's ctx.

// busyScript keeps its node busy for about ARGV[1] ms, without reading a
// clock (Valkey gives a script the time it began at throughout).
const busyScript = `local n = 0
for i = 1, tonumber(ARGV[1]) * 100000 do n = n + i % 7 end
return 1`

// batchedEngine starts n nodes and an engine over them that batches.
func batchedEngine(t *testing.T, n int) (*Engine, []*redis.Client) {
	t.Helper()
	clients := make([]*redis.Client, n)
	nodes := make([]redis.UniversalClient, n)
	for i := range n {
		p, err := node.StartProcess(context.Background(), node.Config{})
		if err != nil {
			t.Fatal(err)
		}
		// A long ReadTimeout: four 300 ms busy scripts run one after
		// another on a node, and beside a load on two cores they took
		// longer than the default 3 s (CI of e77e7d0, beside a profiling run). It still ends a
		// call, not the call's ctx.
		clients[i] = redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 20 * time.Second})
		nodes[i] = clients[i]
		t.Cleanup(func() {
			clients[i].Close()
			p.Close()
		})
	}
	// A node timeout far above the busy scripts' few hundred ms: the
	// tests run beside others on two cores (a review saw four 100 ms
	// scripts outlast a 1 s node timeout), and only the round's ctx is
	// meant to end a call here.
	e := New(nodes, Config{NodeTimeout: 5 * time.Second, Patience: 10 * time.Second, Batch: batch.MaxBatch})
	return e, clients
}

// busy fills every link of e's places in flight with calls that keep its
// node busy for ms (the node runs them one after another; each is made
// once the one before is overdue, so that it goes beside it), and returns
// a channel closed once they have all returned: calls made meanwhile
// queue for the next batch.
func busy(t *testing.T, e *Engine, ms int) <-chan struct{} {
	t.Helper()
	var wg sync.WaitGroup
	for range batch.MaxInFlight {
		for _, l := range e.batches {
			wg.Go(func() {
				if err := l.Do(context.Background(), "eval", busyScript, 0, ms).Err(); err != nil {
					t.Errorf("busy call: %v", err)
				}
			})
		}
		time.Sleep(5 * batch.MinPatience) // it reaches the node and is overdue
	}
	time.Sleep(20 * time.Millisecond)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// setSplit sets key to its node's index, split for a batch; op counts the
// calls that ran whole (on a worker).
type setSplit struct {
	key    string
	wholes atomic.Int32
	cmd    func(i int) []any // if set, the command instead of SET
	whole  func(i int) []any // if set, op's command instead of cmd's
}

func (s *setSplit) Command(i int) []any {
	if s.cmd != nil {
		return s.cmd(i)
	}
	return []any{"set", s.key, strconv.Itoa(i)}
}

func (s *setSplit) Parse(_ int, cmd *redis.Cmd) (Outcome, int64, error) {
	if err := cmd.Err(); err != nil {
		return NodeFailed, 0, err
	}
	return NodeGranted, 0, nil
}

func (s *setSplit) op(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
	s.wholes.Add(1)
	args := s.Command(i)
	if s.whole != nil {
		args = s.whole(i)
	}
	return s.Parse(i, node.Do(ctx, args...))
}

// replies collects what Then is given, per node.
type replies struct {
	mu  sync.Mutex
	got map[int][]Reply
}

func (r *replies) then(rep Reply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[int][]Reply{}
	}
	r.got[rep.Node] = append(r.got[rep.Node], rep)
}

func (r *replies) of(i int) []Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[i]
}

// A round made while every link is busy rides the next batches: no worker
// runs its calls, and each node's reply reaches the tally and Then once.
func TestQueuedCallsAreAnsweredWithoutAWorker(t *testing.T) {
	e, clients := batchedEngine(t, 3)
	defer func() { e.Close(); e.Wait() }()
	s := &setSplit{key: "queued"}
	var r replies
	done := busy(t, e, 100)
	tally, err := e.Run(context.Background(), Spec{Name: "lock", Op: s.op, Split: s, Then: r.then}, nil, nil)
	<-done
	if err != nil || tally.Granted() != 3 {
		t.Fatalf("Run: %v, %v; want every node granted", err, tally.Results)
	}
	if n := s.wholes.Load(); n != 0 {
		t.Errorf("%d calls ran on a worker; every link was busy, so each should have been queued", n)
	}
	e.Wait()
	for i, c := range clients {
		if v, _ := c.Get(context.Background(), "queued").Result(); v != strconv.Itoa(i) {
			t.Errorf("node %d holds %q", i, v)
		}
		if got := r.of(i); len(got) != 1 || got[0].Outcome != NodeGranted {
			t.Errorf("node %d: Then was given %v, want one grant", i, got)
		}
	}
}

// A queued call whose round's ctx ends before its batch leaves is never
// sent: its reply says so at once, and the node never runs it, though the
// client's go-redis calls end only at their ReadTimeout.
func TestAQueuedCallCutByCtxIsNeverSent(t *testing.T) {
	e, clients := batchedEngine(t, 3)
	defer func() { e.Close(); e.Wait() }()
	s := &setSplit{key: "unsent"}
	var r replies
	done := busy(t, e, 300)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := e.Run(ctx, Spec{Name: "lock", Op: s.op, Split: s, Then: r.then}, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want ctx's deadline", err)
	}
	select {
	case <-done:
		t.Fatal("the busy calls ended before the round's ctx: the test proves nothing on a machine this slow")
	default:
	}
	e.Wait() // every Then has run
	<-done
	for i, c := range clients {
		// The reply does not say "not sent": the caller's ctx ended it,
		// whatever else happened (noAnswerError), as for a worker's call.
		if got := r.of(i); len(got) != 1 || got[0].Outcome != NodeTimedOut {
			t.Errorf("node %d: Then was given %v, want one NodeTimedOut", i, got)
		}
		if n, _ := c.Exists(context.Background(), "unsent").Result(); n != 0 {
			t.Errorf("node %d ran a call that was reported not sent", i)
		}
	}
}

// A queued call whose batch has left when the round's ctx ends ends then,
// as a worker's call would, and not when its node answers: the reply that
// comes later is dropped, and Then is not run twice.
func TestAQueuedCallInFlightEndsAtItsCtx(t *testing.T) {
	e, _ := batchedEngine(t, 3)
	defer func() { e.Close(); e.Wait() }()
	s := &setSplit{key: "slow", cmd: func(int) []any { return []any{"eval", busyScript, 0, 400} }}
	var r replies
	done := busy(t, e, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	tally, err := e.Run(ctx, Spec{Name: "lock", Op: s.op, Split: s, Then: r.then}, nil, nil)
	<-done
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v (%v), want ctx's deadline", err, tally.Results)
	}
	for i := range 3 {
		// Then runs on the watch's goroutine; give it a moment, not the
		// 400 ms the node takes to answer.
		for try := 0; try < 100 && len(r.of(i)) == 0; try++ {
			time.Sleep(time.Millisecond)
		}
		got := r.of(i)
		var notSent *batch.NotSentError
		if len(got) != 1 || got[0].Outcome != NodeTimedOut || errors.As(got[0].Err, &notSent) {
			t.Errorf("node %d: Then was given %v before its node answered, want one NodeTimedOut that was sent", i, got)
		}
	}
	e.Wait() // the batches have returned, and their replies were dropped
	for i := range 3 {
		if got := r.of(i); len(got) != 1 {
			t.Errorf("node %d: Then ran %d times", i, len(got))
		}
	}
}

// A node that does not know the script a queued call names (restarted, or
// flushed) answers NOSCRIPT without running it: the call runs whole, on a
// worker, which sends the source.
func TestAQueuedCallTheNodeHasNoScriptForRunsWhole(t *testing.T) {
	e, clients := batchedEngine(t, 3)
	defer func() { e.Close(); e.Wait() }()
	const unknown = "ffffffffffffffffffffffffffffffffffffffff"
	s := &setSplit{key: "whole", cmd: func(int) []any { return []any{"evalsha", unknown, 0} },
		whole: func(i int) []any { return []any{"set", "whole", strconv.Itoa(i)} }}
	var r replies
	done := busy(t, e, 100)
	tally, err := e.Run(context.Background(), Spec{Name: "lock", Op: s.op, Split: s, Then: r.then}, nil, nil)
	<-done
	if err != nil || tally.Granted() != 3 {
		t.Fatalf("Run: %v, %v; want every node granted by the whole call", err, tally.Results)
	}
	e.Wait()
	if n := s.wholes.Load(); n != 3 {
		t.Errorf("%d calls ran whole, want 3: each NOSCRIPT falls back", n)
	}
	for i, c := range clients {
		if v, _ := c.Get(context.Background(), "whole").Result(); v != strconv.Itoa(i) {
			t.Errorf("node %d holds %q", i, v)
		}
	}
}

// Close with queued calls: Wait returns once every one has its reply and
// its Then has run.
func TestWaitOutlastsTheQueuedCalls(t *testing.T) {
	e, _ := batchedEngine(t, 3)
	var sent atomic.Int32
	e.hooks.NodeCall = func(string, int) { sent.Add(1) }
	s := &setSplit{key: "closing"}
	var r replies
	done := busy(t, e, 100)
	defer func() { <-done }()
	const rounds = 20
	var wg sync.WaitGroup
	for range rounds {
		wg.Go(func() {
			_, _ = e.Run(context.Background(), Spec{Name: "lock", Op: s.op, Split: s, Then: r.then}, nil, nil)
		})
	}
	time.Sleep(10 * time.Millisecond)
	e.Close()
	e.Wait()
	total := 0
	for i := range 3 {
		total += len(r.of(i))
	}
	wg.Wait()
	if n := int(sent.Load()); total != n || n == 0 {
		t.Fatalf("Then ran %d times by the time Wait returned, for %d calls sent", total, n)
	}
}
