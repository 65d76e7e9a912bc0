package redlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// argsHook runs before(args) ahead of each command and after(args) once
// the node answered: the election's scripts, which ScriptName does not name.
type argsHook struct {
	before func(args []any) error
	after  func(args []any)
}

func (h *argsHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *argsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *argsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.before != nil {
			if err := h.before(cmd.Args()); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		err := next(ctx, cmd)
		if h.after != nil {
			h.after(cmd.Args())
		}
		return err
	}
}

func isProclaim(args []any) bool { return isElectionScript(args, nodescript.Proclaim) }

// proclaimHooks: once armed, each node holds its first proclaim call until
// a later proclaim call on that node has been answered (at most 4 s).
func proclaimHooks(n int, armed *atomic.Bool) map[int]redis.Hook {
	out := map[int]redis.Hook{}
	for i := 0; i < n; i++ {
		var (
			mu       sync.Mutex
			calls    int
			released = make(chan struct{})
			once     sync.Once
		)
		out[i] = &argsHook{
			before: func(args []any) error {
				if !armed.Load() || !isProclaim(args) {
					return nil
				}
				mu.Lock()
				calls++
				first := calls == 1
				mu.Unlock()
				if first {
					select {
					case <-released:
					case <-time.After(4 * time.Second):
					}
				}
				return nil
			},
			after: func(args []any) {
				if !armed.Load() || !isProclaim(args) {
					return
				}
				mu.Lock()
				later := calls > 1
				mu.Unlock()
				if later {
					once.Do(func() { close(released) })
				}
			},
		}
	}
	return out
}
