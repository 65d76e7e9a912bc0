package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// BenchmarkLockUnlock measures one uncontended TryLock+Unlock over N nodes.
func BenchmarkLockUnlock(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			cl := startCluster(b, n)
			c, err := redlock.New(cl.clients, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(time.Second))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
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
		})
	}
}
