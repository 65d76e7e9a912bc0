package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

func BenchmarkZZCycle(b *testing.B) {
	for _, kind := range []string{"mutex", "read"} {
		b.Run(kind, func(b *testing.B) {
			cl := startCluster(b, 1)
			c, _ := redlock.New(cl.clients, redlock.WithTTL(10*time.Second))
			defer c.Close()
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				name := fmt.Sprint("r", i)
				if kind == "mutex" {
					l, err := c.TryLock(ctx, name)
					if err != nil {
						b.Fatal(err)
					}
					l.Unlock(ctx)
					continue
				}
				rw, _ := c.RWMutex(name)
				l, err := rw.TryRLock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				l.Unlock(ctx)
			}
		})
	}
}
