package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// locker is one lock implementation under test.
type locker interface {
	// lock acquires key, waiting as the implementation does, and returns
	// the release.
	lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	// try makes one attempt.
	try(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	close()
}

const ttl = 10 * time.Second

// ours is this library.
type ours struct{ c *redlock.Client }

func newOurs(nodes []redis.UniversalClient, opts ...redlock.Option) (*ours, error) {
	c, err := redlock.New(nodes, append([]redlock.Option{redlock.WithTTL(ttl)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &ours{c}, nil
}

func (o *ours) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := o.c.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (o *ours) try(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := o.c.TryLock(ctx, key)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (o *ours) close() { o.c.Close() }

// redsyncLocker is go-redsync/redsync v4 with its defaults.
type redsyncLocker struct{ rs *redsync.Redsync }

func newRedsync(nodes []redis.UniversalClient) *redsyncLocker {
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = rsgoredis.NewPool(n)
	}
	return &redsyncLocker{redsync.New(pools...)}
}

func (r *redsyncLocker) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(key)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
}

func (r *redsyncLocker) try(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(key)
	if err := m.TryLockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
}

func (r *redsyncLocker) close() {}

// bsmLocker is bsm/redislock on one node, for reference.
type bsmLocker struct{ c *redislock.Client }

func (b *bsmLocker) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := b.c.Obtain(ctx, key, ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (b *bsmLocker) try(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := b.c.Obtain(ctx, key, ttl, nil)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (b *bsmLocker) close() {}

// floor is the least any quorum lock can do: SET NX PX on every node in
// parallel, then a compare-and-delete script on every node in parallel.
type floor struct{ nodes []redis.UniversalClient }

var releaseLua = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

var errNotAcquired = errors.New("floor: no majority")

func (f *floor) try(ctx context.Context, key string) (func(context.Context) error, error) {
	var buf [16]byte
	rand.Read(buf[:])
	value := hex.EncodeToString(buf[:])
	ok := f.all(func(n redis.UniversalClient) bool { return n.SetNX(ctx, key, value, ttl).Val() })
	release := func(ctx context.Context) error {
		f.all(func(n redis.UniversalClient) bool { return releaseLua.Run(ctx, n, []string{key}, value).Err() == nil })
		return nil
	}
	if ok < len(f.nodes)/2+1 {
		release(ctx)
		return nil, errNotAcquired
	}
	return release, nil
}

func (f *floor) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	for {
		u, err := f.try(ctx, key)
		if err == nil || ctx.Err() != nil {
			return u, err
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *floor) all(do func(redis.UniversalClient) bool) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, node := range f.nodes {
		wg.Go(func() {
			if do(node) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}

func (f *floor) close() {}

func mustOurs(nodes []redis.UniversalClient, opts ...redlock.Option) *ours {
	o, err := newOurs(nodes, opts...)
	if err != nil {
		panic(fmt.Sprint("redlock.New: ", err))
	}
	return o
}
