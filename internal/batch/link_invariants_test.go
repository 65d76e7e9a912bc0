package batch_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/batch"
	"github.com/redis/go-redis/v9"
)

// concHook counts sends in flight at the transport (plain commands and
// pipelines), and the most at once.
type concHook struct{ cur, max atomic.Int32 }

func (h *concHook) enter() {
	n := h.cur.Add(1)
	for {
		m := h.max.Load()
		if n <= m || h.max.CompareAndSwap(m, n) {
			return
		}
	}
}

// counted wraps the node's client at the link's edge: Do, Process and
// pipelines' Exec count as sends (go-redis's own HELLO/SETINFO on a fresh
// connection would be counted by a hook inside a send).
type counted struct {
	redis.UniversalClient
	h *concHook
}

func (c counted) Do(ctx context.Context, args ...any) *redis.Cmd {
	c.h.enter()
	defer c.h.cur.Add(-1)
	return c.UniversalClient.Do(ctx, args...)
}
func (c counted) Process(ctx context.Context, cmd redis.Cmder) error {
	c.h.enter()
	defer c.h.cur.Add(-1)
	return c.UniversalClient.Process(ctx, cmd)
}
func (c counted) Pipeline() redis.Pipeliner { return countedPipe{c.UniversalClient.Pipeline(), c.h} }

type countedPipe struct {
	redis.Pipeliner
	h *concHook
}

func (p countedPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	p.h.enter()
	defer p.h.cur.Add(-1)
	return p.Pipeliner.Exec(ctx)
}

func (h *concHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *concHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.enter()
		defer h.cur.Add(-1)
		return next(ctx, cmd)
	}
}
func (h *concHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.enter()
		defer h.cur.Add(-1)
		return next(ctx, cmds)
	}
}

// Mixed load: held-up calls (BLPOP), short ctx timeouts, cancels, calls
// without deadline, and node pauses. Checks: at most MaxInFlight sends at
// the transport; every call with a deadline returns by it (plus slack);
// a NotSent call never ran on the node; after Wait nothing is in flight or
// queued, no timer is armed, and no goroutine is left (goleak, TestMain).
func TestLinkKeepsItsInvariantsUnderPausesAndCancels(t *testing.T) {
	p, c := startNode(t)
	h := &concHook{}
	l := batch.NewLink(counted{c, h}, 8) // small batches: more sends
	ctx := context.Background()
	g0 := runtime.NumGoroutine()

	stopPause := make(chan struct{})
	pauses := make(chan struct{})
	go func() {
		defer close(pauses)
		for range 6 {
			select {
			case <-stopPause:
				return
			case <-time.After(time.Duration(40+rand.IntN(60)) * time.Millisecond):
			}
			_ = p.Pause(ctx)
			time.Sleep(time.Duration(5+rand.IntN(40)) * time.Millisecond)
			_ = p.Resume(ctx)
		}
	}()

	var mu sync.Mutex
	var notSentKeys []string
	var late, okN, nsN, otherN atomic.Int32
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 120 {
				key := "k:" + strconv.Itoa(w) + ":" + strconv.Itoa(i)
				r := rand.IntN(100)
				switch {
				case r < 4: // held up without holding the node
					cctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
					_ = l.Do(cctx, "blpop", "nobody:"+key, "0.2").Err()
					cancel()
					continue
				case r < 10: // no deadline
					if err := l.Do(ctx, "set", key, 1).Err(); err != nil {
						otherN.Add(1)
					}
					continue
				}
				d := time.Duration(1+rand.IntN(30)) * time.Millisecond
				cctx, cancel := context.WithTimeout(ctx, d)
				if r < 20 {
					go func() { time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond); cancel() }()
				}
				start := time.Now()
				err := l.Do(cctx, "set", key, 1).Err()
				took := time.Since(start)
				cancel()
				var ns *batch.NotSentError
				var ne net.Error
				switch {
				case err == nil:
					okN.Add(1)
				case errors.As(err, &ns):
					nsN.Add(1)
					mu.Lock()
					notSentKeys = append(notSentKeys, key)
					mu.Unlock()
				case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.As(err, &ne) && ne.Timeout():
					otherN.Add(1)
				default:
					otherN.Add(1)
				}
				if took > d+time.Second { // a second of slack: the machine is busy, a hang is not
					late.Add(1)
					t.Errorf("call %s with timeout %v returned after %v: %v", key, d, took, err)
				}
			}
		})
	}
	wg.Wait()
	close(stopPause)
	<-pauses
	_ = p.Resume(ctx)
	l.Wait()
	in, rtt, pat, q, armed := l.State()
	t.Logf("ok=%d notSent=%d other=%d late=%d maxConc=%d; after Wait: inFlight=%d rtt=%v patience=%v queued=%d armed=%v goroutines %d->%d",
		okN.Load(), nsN.Load(), otherN.Load(), late.Load(), h.max.Load(), in, rtt, pat, q, armed, g0, runtime.NumGoroutine())
	if m := h.max.Load(); m > batch.MaxInFlight {
		t.Errorf("%d sends at once at the transport, want <= %d", m, batch.MaxInFlight)
	}
	if in != 0 || q != 0 {
		t.Errorf("after Wait: inFlight=%d queued=%d", in, q)
	}
	for _, k := range notSentKeys {
		if n, _ := c.Exists(ctx, k).Result(); n != 0 {
			t.Errorf("NotSent call %s ran on the node", k)
		}
	}
	// a held-up call still goes beside after all that (no upward drift)
	held := make(chan struct{})
	go func() { _ = l.Do(ctx, "blpop", "nobody-after", 1).Err(); close(held) }()
	time.Sleep(time.Duration(max(10*time.Millisecond, 2*pat)))
	cctx, cancel := context.WithTimeout(ctx, 2*pat+50*time.Millisecond)
	if err := l.Do(cctx, "incr", "after").Err(); err != nil {
		t.Errorf("a call after the held-up one: %v (state %v %v)", err, in, pat)
	}
	cancel()
	<-held
	l.Wait()
}
