package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
)

// Two candidates run Run in a loop with one node of three paused: at most
// one fn at a time, fenced writes with growing terms never refused for the
// current leader, Leader's term and value are the running leader's.
func TestNoTwoLeadersRunAtOnceWithANodePaused(t *testing.T) {
	cl := startCluster(t, 3)
	cl.pause(t, 2)
	opts := []redlock.Option{redlock.WithTTL(500 * time.Millisecond), redlock.WithNodeTimeout(50 * time.Millisecond)}
	eo, _ := cl.newClient(t, opts...).Election("overlap")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	store := &fence.Memory{}
	var inside atomic.Int32
	var mu sync.Mutex
	var bad []string
	var terms, mismatches atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		e, _ := cl.newClient(t, opts...).Election("overlap")
		wg.Go(func() {
			for i := 0; i < 200 && ctx.Err() == nil; i++ {
				v := fmt.Sprint("w", w, "-", i)
				_ = e.Run(ctx, v, func(fctx context.Context, ld *redlock.Leadership) error {
					if n := inside.Add(1); n != 1 {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("%d leaders at once", n))
						mu.Unlock()
					}
					defer inside.Add(-1)
					terms.Add(1)
					if err := store.Do(fctx, "k", ld.Term(), ld.ID(), func() error { return nil }); err != nil && fctx.Err() == nil {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("leader's write refused: %v", err))
						mu.Unlock()
					}
					if info, err := eo.Leader(fctx); err == nil && (info.Term != ld.Term() || info.Value != v || info.ID != ld.ID()) && fctx.Err() == nil {
						mismatches.Add(1)
						mu.Lock()
						bad = append(bad, fmt.Sprintf("Leader %+v while %s leads with term %d", info, v, ld.Term()))
						mu.Unlock()
					} else if errors.Is(err, redlock.ErrNoLeader) {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("ErrNoLeader while %s leads", v))
						mu.Unlock()
					}
					time.Sleep(20 * time.Millisecond)
					return nil
				})
			}
		})
	}
	wg.Wait()
	t.Logf("%d terms; problems: %d", terms.Load(), len(bad))
	for i, b := range bad {
		if i < 5 {
			t.Error(b)
		}
	}
}
