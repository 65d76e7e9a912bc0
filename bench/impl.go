package main

import (
	"context"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// locker is one lock implementation under test. It owns its connections:
// close releases them.
type locker interface {
	// lock acquires key, waiting as the implementation does, and returns
	// the release.
	lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	// try makes one attempt.
	try(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	close()
}

const ttl = 10 * time.Second

// spec is one row of the report: how to build the implementation over a
// set of node addresses, with new connections (not dialled yet).
type spec struct {
	name string
	// options says exactly how the row is configured, for the report.
	options string
	make    func(addrs []string) (locker, error)
}

// newClients returns go-redis clients at their defaults, except
// ContextTimeoutEnabled when ctxTimeout is set. They dial on first use.
func newClients(addrs []string, ctxTimeout bool) []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: ctxTimeout})
	}
	return cs
}

// ours is this library.
type ours struct {
	c     *redlock.Client
	nodes []redis.UniversalClient
}

func newOurs(addrs []string, opts ...redlock.Option) (locker, error) {
	cs := newClients(addrs, false)
	c, err := redlock.New(cs, append([]redlock.Option{redlock.WithTTL(ttl)}, opts...)...)
	if err != nil {
		closeAll(cs)
		return nil, err
	}
	return &ours{c, cs}, nil
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

func (o *ours) close() {
	o.c.Close()
	closeAll(o.nodes)
}

// The rows. Names are the report's row labels and must stay unique.
const (
	nFloorAll  = "floor: go-redis, waits for all"
	nFloorMaj  = "floor: go-redis, returns at majority"
	nFloorRaw  = "floor: raw pipelined, returns at majority"
	nFloorBat  = "floor: go-redis batched, returns at majority"
	nOursUnf   = "redlock, unfenced"
	nOursFen   = "redlock, fenced"
	nRSBest    = "redsync v4, best"
	nRSDefault = "redsync v4, defaults"
	nBSM       = "bsm/redislock (1 node)"
)

func floorSpecs() []spec {
	return []spec{
		{nFloorAll, "go-redis clients at defaults; SET NX PX on all nodes in parallel, wait for all; then EVALSHA compare-and-delete on all, wait for all",
			func(a []string) (locker, error) { return &goFloor{nodes: newClients(a, false)}, nil }},
		{nFloorMaj, "as above, but each round returns once N/2+1 nodes answered (the rest finish in the background); the reference for ratios",
			func(a []string) (locker, error) { return &goFloor{nodes: newClients(a, false), majority: true}, nil }},
		{nFloorBat, "the same go-redis clients and commands, returning at N/2+1, but each node's commands made while one is in flight to it go out together as one Pipeline when it returns: the floor for a batched client",
			func(a []string) (locker, error) { return newBatchedFloor(newClients(a, false)), nil }},
		{nFloorRaw, "one net.Conn per node, RESP written by hand, requests pipelined, both rounds return at N/2+1: the physical floor",
			func(a []string) (locker, error) { return newRawFloor(a), nil }},
	}
}

func oursSpec(fenced bool) spec {
	if fenced {
		return spec{nOursFen, "`redlock.New(clients, WithTTL(10s))`, every other option at its default; go-redis clients at defaults",
			func(a []string) (locker, error) { return newOurs(a) }}
	}
	return spec{nOursUnf, "`redlock.New(clients, WithTTL(10s), WithoutFencing())`, every other option at its default; go-redis clients at defaults",
		func(a []string) (locker, error) { return newOurs(a, redlock.WithoutFencing()) }}
}

// counted is oursSpec with an observer that counts acquisition attempts,
// for the contention step.
func counted(fenced bool) spec {
	s := oursSpec(fenced)
	opts := []redlock.Option{countAttempts}
	if !fenced {
		opts = append(opts, redlock.WithoutFencing())
	}
	s.make = func(a []string) (locker, error) { return newOurs(a, opts...) }
	return s
}
