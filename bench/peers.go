package main

import (
	"context"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// redsyncLocker is go-redsync/redsync v4 with the given mutex options.
type redsyncLocker struct {
	rs    *redsync.Redsync
	opts  []redsync.Option
	nodes []redis.UniversalClient
}

// bestTries lets a redsync best Lock retry, 1 ms apart, for longer than
// any wait in the contention step; the context ends it first.
const bestTries = 100000

func redsyncSpecs() (best, defaults spec) {
	best = spec{nRSBest, "go-redis clients with `ContextTimeoutEnabled: true`; `NewMutex(name, WithFailFast(true), WithRetryDelay(time.Millisecond), WithTries(100000))`, expiry at its 8 s default",
		func(a []string) (locker, error) {
			return newRedsync(newClients(a, true), redsync.WithFailFast(true), redsync.WithRetryDelay(time.Millisecond),
				redsync.WithTries(bestTries)), nil
		}}
	defaults = spec{nRSDefault, "go-redis clients at defaults; `NewMutex(name)`: 32 tries 50-250 ms apart, 8 s expiry, per-node timeout 5% of it (400 ms)",
		func(a []string) (locker, error) { return newRedsync(newClients(a, false)), nil }}
	return best, defaults
}

func newRedsync(nodes []redis.UniversalClient, opts ...redsync.Option) *redsyncLocker {
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = rsgoredis.NewPool(n)
	}
	return &redsyncLocker{rs: redsync.New(pools...), opts: opts, nodes: nodes}
}

func (r *redsyncLocker) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
}

func (r *redsyncLocker) try(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.TryLockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
}

func (r *redsyncLocker) close() { closeAll(r.nodes) }

// bsmLocker is bsm/redislock on the first node only, for reference.
type bsmLocker struct {
	c    *redislock.Client
	node *redis.Client
}

func bsmSpec() spec {
	return spec{nBSM, "bsm/redislock v0.9 on the first node only (not a quorum lock); go-redis client at defaults",
		func(a []string) (locker, error) {
			n := redis.NewClient(&redis.Options{Addr: a[0]})
			return &bsmLocker{redislock.New(n), n}, nil
		}}
}

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

func (b *bsmLocker) close() { b.node.Close() }
