package redlock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// BenchmarkLockUnlock measures one uncontended TryLock+Unlock over N nodes,
// with and without fencing tokens.
func BenchmarkLockUnlock(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		for _, fenced := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/fenced=%t", n, fenced), func(b *testing.B) {
				benchLockUnlock(b, n, fenced)
			})
		}
	}
}

// BenchmarkLockUnlockLink measures one goroutine's TryLock+Unlock over 5
// unfenced nodes through the batching link and without it (issue 33: a
// lone call goes out at once, and must cost no more than without the link).
func BenchmarkLockUnlockLink(b *testing.B) {
	for _, batched := range []bool{true, false} {
		b.Run(fmt.Sprintf("batched=%t", batched), func(b *testing.B) {
			var opts []redlock.Option
			if !batched {
				opts = append(opts, redlock.WithoutBatching())
			}
			benchLockUnlock(b, 5, false, opts...)
		})
	}
}

// benchClient is a client over n new nodes, closed when b ends.
func benchClient(b *testing.B, n int, fenced bool, extra ...redlock.Option) *redlock.Client {
	cl := startCluster(b, n)
	opts := append([]redlock.Option{redlock.WithTTL(10 * time.Second), redlock.WithNodeTimeout(time.Second)}, extra...)
	if !fenced {
		opts = append(opts, redlock.WithoutFencing())
	}
	c, err := redlock.New(cl.clients, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func benchLockUnlock(b *testing.B, n int, fenced bool, opts ...redlock.Option) {
	c := benchClient(b, n, fenced, opts...)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.TryLock(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlockParallel measures TryLock+Unlock on distinct names
// from 64 goroutines sharing one client over 5 nodes: the batched path.
func BenchmarkLockUnlockParallel(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		b.Run(fmt.Sprintf("fenced=%t", fenced), func(b *testing.B) {
			c := benchClient(b, 5, fenced)
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				name := fmt.Sprintf("bench-%d", next.Add(1))
				for pb.Next() {
					l, err := c.TryLock(ctx, name)
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.Unlock(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
