package batch_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/batch"
	"github.com/redis/go-redis/v9"
)

// told is a Completion that records the reply it is told.
type told chan *redis.Cmd

func (c told) Complete(cmd *redis.Cmd) { c <- cmd }

// TryQueue queues only what would wait for a batch: an idle link leaves
// the call to its caller. A queued call is told its own reply once its
// batch returns, and one unsent before its batch left is neither sent nor
// told.
func TestTryQueueRidesTheNextBatchOrLeavesTheCallToItsCaller(t *testing.T) {
	_, c := startNode(t)
	l := batch.NewLink(c, 0)
	ctx := context.Background()
	if p := l.TryQueue(ctx, redis.NewCmd(ctx, "incr", "idle"), make(told, 1)); p != nil {
		t.Fatal("TryQueue queued a call on an idle link: it must go out at once, sent by its caller")
	}
	inFlight := behindBusy(t, l, 200)
	kept, dropped := make(told, 1), make(told, 1)
	if p := l.TryQueue(ctx, redis.NewCmd(ctx, "incr", "kept"), kept); p == nil {
		t.Fatal("TryQueue did not queue a call behind a full link")
	}
	p := l.TryQueue(ctx, redis.NewCmd(ctx, "incr", "dropped"), dropped)
	if p == nil || !p.Unsend() {
		t.Fatal("a call queued behind a full link could not be unsent")
	}
	<-inFlight
	select {
	case cmd := <-kept:
		if n, err := cmd.Int64(); err != nil || n != 1 {
			t.Errorf("the queued call was told %d %v, want its own reply 1", n, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the queued call was never told its reply")
	}
	l.Wait()
	select {
	case cmd := <-dropped:
		t.Errorf("the unsent call was told %v", cmd)
	default:
	}
	if n, _ := c.Exists(ctx, "dropped").Result(); n != 0 {
		t.Error("the unsent call ran on the node")
	}
}

// Unsend once the batch has left reports false, and the reply is told.
func TestUnsendAfterTheBatchLeftIsTooLate(t *testing.T) {
	_, c := startNode(t)
	l := batch.NewLink(c, 0)
	ctx := context.Background()
	inFlight := behindBusy(t, l, 100)
	late := make(told, 1)
	p := l.TryQueue(ctx, redis.NewCmd(ctx, "eval", busy, 0, 100), late)
	if p == nil {
		t.Fatal("TryQueue did not queue a call behind a full link")
	}
	for try := 0; try < 10000 && !p.Left(); try++ {
		time.Sleep(100 * time.Microsecond)
	}
	if p.Unsend() {
		t.Fatal("Unsend succeeded on a call whose batch had left")
	}
	<-inFlight
	select {
	case cmd := <-late:
		if err := cmd.Err(); err != nil {
			t.Errorf("the call was told %v, want its reply", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call was never told its reply")
	}
	l.Wait()
}
