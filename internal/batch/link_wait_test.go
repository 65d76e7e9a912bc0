package batch_test

import (
	"context"
	"sync"
	"testing"

	"github.com/quorumlock/redlock/internal/batch"
)

// Wait may run while batches start: the overdue timer sends what queued
// at any moment, and a Client's Close waits for its links while late
// calls still return. Counting the batches with a WaitGroup raced its Add
// against Wait at zero (the race detector caught it in make test, in
// TestSemaphoreAcquireGivesUpOnAnOutageAsLockDoes's Close); run with
// -race, this starts batches around Waits over and over.
func TestWaitWhileBatchesStart(t *testing.T) {
	_, c := startNode(t)
	l := batch.NewLink(c, 8)
	ctx := context.Background()
	for range 50 {
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				if err := l.Do(ctx, "PING").Err(); err != nil {
					t.Error(err)
				}
			})
		}
		for range 4 {
			wg.Go(l.Wait)
		}
		wg.Wait()
		l.Wait()
	}
}
