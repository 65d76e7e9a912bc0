package redlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// A key of the application's under the semaphore line's names: an
// acquisition that meets it (someone waits in the line) fails with
// ErrWrongType naming the key; one that does not (nobody waits: the line's
// liveness key is never read) succeeds, as it needs nothing from it.
func TestSemaphoreLineKeyOfAnotherTypeIsNamed(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	s := semaphore(t, cl.newClient(t), "ws", 2)
	for _, n := range cl.inspect {
		n.ZAdd(ctx, "redlock:{ws}:line:queue", redis.Z{Member: "x/1*1", Score: 1})
		n.SAdd(ctx, "redlock:{ws}:line:queue:seen", "the application's")
	}
	var wt *redlock.WrongTypeError
	if _, err := s.TryAcquire(ctx); !errors.Is(err, redlock.ErrWrongType) || !errors.As(err, &wt) || wt.Key != "redlock:{ws}:line:queue:seen" {
		t.Fatalf("TryAcquire beside a set under the line's liveness key: %v, want ErrWrongType naming it", err)
	}
	for _, n := range cl.inspect {
		n.Del(ctx, "redlock:{ws}:line:queue")
	}
	p, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire with nobody in line: %v", err)
	}
	_ = p.Release(ctx)
}
