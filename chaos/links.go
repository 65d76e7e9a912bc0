package chaos

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// links are the wires between each worker and each node, so that a
// partition can be asymmetric: a worker cut off from some nodes while other
// workers still reach them. A cut link fails every command at once.
type links struct {
	mu  sync.Mutex
	cut map[[2]int]bool // {worker, node}
}

var errLinkCut = errors.New("chaos: link cut")

func (l *links) set(worker, node int, cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut == nil {
		l.cut = map[[2]int]bool{}
	}
	l.cut[[2]int{worker, node}] = cut
}

func (l *links) isCut(worker, node int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut[[2]int{worker, node}]
}

// hook is the go-redis hook on one worker's client for one node.
func (l *links) hook(worker, node int) redis.Hook { return linkHook{l, worker, node} }

type linkHook struct {
	l            *links
	worker, node int
}

func (h linkHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h linkHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.l.isCut(h.worker, h.node) {
			cmd.SetErr(errLinkCut)
			return errLinkCut
		}
		return next(ctx, cmd)
	}
}

func (h linkHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.l.isCut(h.worker, h.node) {
			return errLinkCut
		}
		return next(ctx, cmds)
	}
}
