package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// lockerACL is the least privilege a lock client needs, as
// docs/operations.md gives it: its own keys and channels, the scripts, and
// the commands those scripts call (Redis checks those too).
var lockerACL = []any{"ACL", "SETUSER", "locker", "on", ">secret", "resetkeys", "~redlock:*",
	"-@all", "+@connection",
	"+eval", "+evalsha", "+subscribe", "+unsubscribe",
	"+time", "+get", "+set", "+del", "+exists", "+incr", "+pexpire",
	"+zadd", "+zrem", "+zrange", "+zscore", "+publish", "+info"}

// A client whose nodes log in as an ACL user limited to the lock's keys and
// channels takes, waits for, extends and releases fenced locks.
func TestLeastPrivilegeACLUser(t *testing.T) {
	nodes := aclNodes(t, "&redlock:*")
	ctx := context.Background()
	newClient := func(opts ...redlock.Option) *redlock.Client {
		c, err := redlock.New(nodes, append(opts, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The waiter's retry delay is longer than the test: only the release
	// notification, which needs the channels, can wake it in time.
	holder, waiter := newClient(), newClient(redlock.WithRetryDelay(time.Minute, time.Minute))
	if err := holder.Provision(ctx); err != nil {
		t.Fatalf("provision as the ACL user: %v", err)
	}
	h, err := holder.TryLock(ctx, "acl")
	if err != nil {
		t.Fatalf("TryLock as the ACL user: %v", err)
	}
	if err := h.Extend(ctx); err != nil {
		t.Fatalf("Extend as the ACL user: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := waiter.Lock(wctx, "acl")
		if err == nil {
			if l.Token() <= h.Token() {
				t.Errorf("token %d after %d", l.Token(), h.Token())
			}
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := h.Unlock(ctx); err != nil {
		t.Fatalf("Unlock as the ACL user: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter as the ACL user: %v", err)
	}
	// The user may touch nothing else.
	if err := nodes[0].Set(ctx, "other", "x", 0).Err(); err == nil {
		t.Fatal("the ACL user could write outside redlock:*; the test's ACL is too wide")
	}
}

// Release notifications are a hint: where an ACL denies the channels, Unlock
// still succeeds (the release script's PUBLISH fails inside it) and a
// waiter gets the lock through its retry delay.
func TestUnlockSucceedsWhenNotificationsAreDenied(t *testing.T) {
	nodes := aclNodes(t) // no channels at all
	ctx := context.Background()
	newClient := func() *redlock.Client {
		c, err := redlock.New(nodes, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second),
			redlock.WithoutFencing())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	holder, waiter := newClient(), newClient()
	h, err := holder.TryLock(ctx, "denied")
	if err != nil {
		t.Fatal(err)
	}
	got := lockAndUnlock(waiter, "denied", 5*time.Second)
	time.Sleep(100 * time.Millisecond) // the waiter is queued: Unlock promises and publishes
	if err := h.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with notifications denied: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter with notifications denied: %v", err)
	}
}

// aclNodes sets up the user "locker" with lockerACL and the given channel
// patterns on three fresh nodes, and returns clients that log in as it.
func aclNodes(t *testing.T, channels ...string) []redis.UniversalClient {
	t.Helper()
	cl := startFreshCluster(t, 3)
	ctx := context.Background()
	acl := append([]any{}, lockerACL...)
	acl = append(acl, "resetchannels")
	for _, c := range channels {
		acl = append(acl, c)
	}
	var nodes []redis.UniversalClient
	for i, in := range cl.inspect {
		if err := in.Do(ctx, acl...).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr(),
			Username: "locker", Password: "secret"}))
	}
	t.Cleanup(func() { node.CloseClients(nodes) })
	return nodes
}

// familyACL is the least privilege of a client that uses the lock family
// too, as docs/operations.md gives it: the mutex's, and the commands the
// family's scripts call besides (readers' sets, the semaphore's size and
// line, the marks of waiting readers and multi-locks), and TYPE, which the
// read-write lock's contended calls use to tell a key of the application's
// at one of its phase keys.
var familyACL = []any{"+pttl", "+zrangebyscore", "+zremrangebyscore", "+zcard", "+type"}

// The lock family as that user: a reader waiting behind a writer, a
// downgrade, a semaphore's line and a permit of two slots, a multi-lock
// waiting for a member, each released.
func TestLeastPrivilegeACLUserFamily(t *testing.T) {
	nodes := aclNodesWith(t, familyACL, "&redlock:*")
	ctx := context.Background()
	newClient := func() *redlock.Client {
		c, err := redlock.New(nodes, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := newClient(), newClient()
	if err := a.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	wait := func(what string, f func(ctx context.Context) error) chan error {
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := f(wctx); err != nil {
				got <- fmt.Errorf("%s: %w", what, err)
				return
			}
			got <- nil
		}()
		time.Sleep(100 * time.Millisecond)
		return got
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	rw := rwMutex(t, a, "acl-rw")
	w, err := rw.TryLock(ctx)
	must(err)
	got := wait("a reader behind the writer", func(ctx context.Context) error {
		r, err := rwMutex(t, b, "acl-rw").RLock(ctx)
		if err != nil {
			return err
		}
		return r.Unlock(ctx)
	})
	must(w.Downgrade(ctx))
	must(w.Extend(ctx))
	must(<-got)
	must(w.Unlock(ctx))

	sem := semaphore(t, a, "acl-sem", 2)
	p, err := sem.TryAcquireN(ctx, 2)
	must(err)
	must(p.Extend(ctx))
	got = wait("a permit in the line", func(ctx context.Context) error {
		q, err := semaphore(t, b, "acl-sem", 2).Acquire(ctx)
		if err != nil {
			return err
		}
		return q.Release(ctx)
	})
	must(p.Release(ctx))
	must(<-got)
	must(sem.SetPermits(ctx, 3))

	m, err := a.TryLock(ctx, "acl-b")
	must(err)
	got = wait("a multi-lock behind a member", func(ctx context.Context) error {
		ml, err := b.LockMulti(ctx, []string{"acl-a", "acl-b"})
		if err != nil {
			return err
		}
		return ml.Unlock(ctx)
	})
	must(m.Unlock(ctx))
	must(<-got)
}

// aclNodesWith is aclNodes with extra commands for the user.
func aclNodesWith(t *testing.T, extra []any, channels ...string) []redis.UniversalClient {
	t.Helper()
	saved := lockerACL
	lockerACL = append(append([]any{}, lockerACL...), extra...)
	defer func() { lockerACL = saved }()
	return aclNodes(t, channels...)
}

// electionACL is what a client that runs elections needs beyond the
// mutex's user (docs/operations.md): the leader's value is a hash.
var electionACL = []any{"+pttl", "+hset", "+hmget"}

// An election runs as the mutex's user with electionACL added: campaign,
// proclaim, read the leader, hand over by Resign.
func TestLeastPrivilegeACLUserElection(t *testing.T) {
	nodes := aclNodesWith(t, electionACL)
	ctx := context.Background()
	c, err := redlock.New(nodes, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	e, _ := c.Election("acl-election")
	ld, err := e.Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := ld.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if info, err := e.Leader(ctx); err != nil || info.Value != "v2" {
		t.Fatalf("Leader as the least-privileged user: %+v, %v", info, err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
