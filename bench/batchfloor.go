package main

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The batched floor (issue 33): goFloor's commands, returning at the
// majority, but every goroutine's command to a node made while another is
// in flight to it waits, and they go out together as one go-redis Pipeline
// when that one returns. It is what the same go-redis clients carry when
// many goroutines' calls share round trips (and, on appendfsync-always
// nodes, fsyncs): the floor a batched quorum lock is measured against.
type batcher struct {
	node  redis.UniversalClient
	mu    sync.Mutex
	busy  bool
	queue []batchedCmd
}

type batchedCmd struct {
	cmd  redis.Cmder
	done chan struct{}
}

// do runs cmd: at once if the node is idle, else in the next pipeline.
func (b *batcher) do(ctx context.Context, cmd redis.Cmder) {
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		_ = b.node.Process(ctx, cmd)
		b.next(ctx)
		return
	}
	done := make(chan struct{})
	b.queue = append(b.queue, batchedCmd{cmd, done})
	b.mu.Unlock()
	<-done
}

// next sends what queued meanwhile, on its own goroutine, or goes idle.
func (b *batcher) next(ctx context.Context) {
	b.mu.Lock()
	q := b.queue
	b.queue = nil
	if len(q) == 0 {
		b.busy = false
	}
	b.mu.Unlock()
	if len(q) == 0 {
		return
	}
	go func() {
		pipe := b.node.Pipeline()
		for _, c := range q {
			_ = pipe.Process(ctx, c.cmd)
		}
		_, _ = pipe.Exec(ctx)
		for _, c := range q {
			close(c.done)
		}
		b.next(ctx)
	}()
}

// batchedFloor is goFloor over batchers.
type batchedFloor struct {
	goFloor
	links map[redis.UniversalClient]*batcher
}

func newBatchedFloor(nodes []redis.UniversalClient) *batchedFloor {
	f := &batchedFloor{goFloor: goFloor{nodes: nodes, majority: true}, links: map[redis.UniversalClient]*batcher{}}
	for _, n := range nodes {
		f.links[n] = &batcher{node: n}
	}
	return f
}

func (f *batchedFloor) try(ctx context.Context, key string) (func(context.Context) error, error) {
	value := newValue()
	bg := context.WithoutCancel(ctx)
	ok := f.roundOn(func(b *batcher) bool {
		cmd := redis.NewBoolCmd(bg, "set", key, value, "px", ttl.Milliseconds(), "nx")
		b.do(bg, cmd)
		return cmd.Err() == nil && cmd.Val()
	})
	release := func(ctx context.Context) error {
		bg := context.WithoutCancel(ctx)
		f.roundOn(func(b *batcher) bool {
			cmd := redis.NewCmd(bg, "evalsha", releaseLua.Hash(), 1, key, value)
			if b.do(bg, cmd); redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
				cmd = redis.NewCmd(bg, "eval", releaseSrc, 1, key, value)
				b.do(bg, cmd)
			}
			return cmd.Err() == nil
		})
		return nil
	}
	if !ok {
		release(ctx)
		return nil, errNotAcquired
	}
	return release, nil
}

func (f *batchedFloor) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	return retryTry(ctx, f, key)
}

// roundOn is goFloor.round over the batchers.
func (f *batchedFloor) roundOn(do func(*batcher) bool) bool {
	return f.round(func(n redis.UniversalClient) bool { return do(f.links[n]) })
}
