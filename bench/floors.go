package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The go-redis floors are the least a quorum lock built on go-redis can do:
// SET NX PX on every node in parallel, then a compare-and-delete script on
// every node in parallel. goFloor with majority false waits for every node
// in both rounds (the bench's floor before issue 13); with majority true it
// returns once N/2+1 nodes have answered, as a RedLock client may.
type goFloor struct {
	nodes    []redis.UniversalClient
	majority bool
}

var releaseLua = redis.NewScript(releaseSrc)

var errNotAcquired = errors.New("floor: no majority")

func newValue() string {
	var buf [16]byte
	rand.Read(buf[:])
	return hex.EncodeToString(buf[:])
}

func (f *goFloor) try(ctx context.Context, key string) (func(context.Context) error, error) {
	value := newValue()
	// Calls still running after a majority returned finish on their own:
	// the caller's cancellation must not cut them short.
	bg := context.WithoutCancel(ctx)
	ok := f.round(func(n redis.UniversalClient) bool { return n.SetNX(bg, key, value, ttl).Val() })
	release := func(ctx context.Context) error {
		bg := context.WithoutCancel(ctx)
		f.round(func(n redis.UniversalClient) bool { return releaseLua.Run(bg, n, []string{key}, value).Err() == nil })
		return nil
	}
	if !ok {
		release(ctx)
		return nil, errNotAcquired
	}
	return release, nil
}

func (f *goFloor) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	return retryTry(ctx, f, key)
}

// round calls do on every node in parallel and reports whether a majority
// said yes; it waits for every node unless f.majority, and then returns as
// soon as the outcome is decided.
func (f *goFloor) round(do func(redis.UniversalClient) bool) bool {
	n := len(f.nodes)
	need := n/2 + 1
	answers := make(chan bool, n)
	for _, node := range f.nodes {
		go func() { answers <- do(node) }()
	}
	yes, no := 0, 0
	for range n {
		if <-answers {
			yes++
		} else {
			no++
		}
		if f.majority && (yes >= need || no > n-need) {
			break
		}
	}
	return yes >= need
}

func (f *goFloor) close() { closeAll(f.nodes) }

// retryTry is the floors' lock: a try every millisecond until ctx ends.
func retryTry(ctx context.Context, l locker, key string) (func(context.Context) error, error) {
	for {
		u, err := l.try(ctx, key)
		if err == nil || ctx.Err() != nil {
			return u, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func closeAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		c.Close()
	}
}
