package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// dbSizes returns every node's key count.
func (cl *cluster) dbSizes(t *testing.T) []int64 {
	t.Helper()
	out := make([]int64, len(cl.inspect))
	for i, c := range cl.inspect {
		n, err := c.DBSize(context.Background()).Result()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		out[i] = n
	}
	return out
}

// Issue 23 §5: inspection for dashboards and runbooks. Inspect tells a
// free name from a held one, with the holder's token and a remaining time
// a majority agrees on, and writes nothing (here: no key appears; see
// TestInspectAsAReadOnlyUser for the commands).
func TestInspectTellsWhetherANameIsHeld(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()

	before := cl.dbSizes(t)
	info, err := c.Inspect(ctx, "inspected")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || info.Remaining != 0 || info.Token != 0 || len(info.Nodes) != 5 {
		t.Errorf("a free name: %+v", info)
	}
	for _, n := range info.Nodes {
		if n.Err != nil || n.Holder != "" || n.TTL != 0 {
			t.Errorf("node %d of a free name: %+v", n.Node, n)
		}
	}
	if after := cl.dbSizes(t); !slices.Equal(before, after) {
		t.Errorf("Inspect wrote: key counts %v -> %v", before, after)
	}

	l, err := c.TryLock(ctx, "inspected", redlock.For(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	info, err = c.Inspect(ctx, "inspected")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Token != l.Token() || info.Token == 0 {
		t.Errorf("a held name: held %v, token %d, want the lock's %d", info.Held, info.Token, l.Token())
	}
	if info.Remaining <= 50*time.Second || info.Remaining > time.Until(l.Until())+time.Second {
		t.Errorf("a held name: remaining %v, the lock's validity %v", info.Remaining, time.Until(l.Until()))
	}
	holders := 0
	for _, n := range info.Nodes {
		if n.Err == nil && n.Holder == info.Nodes[0].Holder && n.Holder != "" && n.TTL > 50*time.Second {
			holders++
		}
	}
	if holders < 3 {
		t.Errorf("nodes holding the lock: %d, want at least 3: %+v", holders, info.Nodes)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	cl.holdersOnceReleased(t, "inspected")
	if info, err = c.Inspect(ctx, "inspected"); err != nil || info.Held {
		t.Errorf("after Unlock: %+v, %v", info, err)
	}
	committed := 0
	for _, n := range info.Nodes {
		if n.Token == l.Token() {
			committed++
		}
	}
	if committed < 3 {
		t.Errorf("%d nodes record the last committed token %d after Unlock, want a majority: %+v", committed, l.Token(), info.Nodes)
	}

	// Unfenced: no token.
	u := cl.newClient(t, redlock.WithoutFencing(), redlock.WithTTL(2*time.Second))
	lu, err := u.TryLock(ctx, "inspected-unfenced")
	if err != nil {
		t.Fatal(err)
	}
	defer lu.Unlock(ctx)
	if info, err = u.Inspect(ctx, "inspected-unfenced"); err != nil || !info.Held || info.Token != 0 {
		t.Errorf("unfenced, held: %+v, %v", info, err)
	}
}

// With a majority silent, Inspect says too few nodes answered (typed, with
// each node's cause) and still returns what the others said.
func TestInspectWithAMajoritySilentIsUnavailable(t *testing.T) {
	cl := startCluster(t, 5)
	c := cl.newClient(t, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()
	cl.pause(t, 0, 1, 2)
	info, err := c.Inspect(ctx, "silent")
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrUnavailable) || qe.Op != "inspect" || len(qe.Nodes) != 5 {
		t.Fatalf("Inspect with 3 of 5 paused: %v, want a QuorumError of ErrUnavailable", err)
	}
	if info.Held || len(info.Nodes) != 5 {
		t.Errorf("info: %+v", info)
	}
	for i, n := range info.Nodes {
		if answered := n.Err == nil; answered != (i >= 3) {
			t.Errorf("node %d: %+v", i, n)
		}
	}
	if _, err := c.Inspect(ctx, ""); !errors.Is(err, redlock.ErrEmptyName) {
		t.Errorf("empty name: %v", err)
	}
}

// watcherACL is the user docs/operations.md gives for dashboards: the
// lock's keys, the script commands, and no command that writes but the
// two read commands Inspect's script calls. Redis checks the commands a
// script calls against the user, so Inspect succeeding as this user shows
// that it calls no write command. (Read-only key access, %R~, is not
// enough: EVAL declares its keys as written, whatever the script does.)
var watcherACL = []any{"ACL", "SETUSER", "watcher", "on", ">secret", "resetkeys", "~redlock:*",
	"-@all", "+@connection", "+eval", "+evalsha", "+get", "+pttl", "+time", "+type", "+zcount", "+zscore", "+zrangebyscore"}

// asWatcher creates the watcher user on every node and returns a lock
// client logged in as it.
func (cl *cluster) asWatcher(t *testing.T) *redlock.Client {
	t.Helper()
	var nodes []redis.UniversalClient
	for i, in := range cl.inspect {
		if err := in.Do(context.Background(), watcherACL...).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr(), Username: "watcher", Password: "secret"}))
	}
	t.Cleanup(func() { node.CloseClients(nodes) })
	watcher, err := redlock.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Close() })
	return watcher
}

func TestInspectAsAReadOnlyUser(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	watcher := cl.asWatcher(t)
	l, err := cl.newClient(t).TryLock(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	info, err := watcher.Inspect(ctx, "watched")
	if err != nil || !info.Held || info.Token != l.Token() {
		t.Fatalf("Inspect as a read-only user: %+v, %v", info, err)
	}
	// The user really is read-only: a lock attempt is refused.
	if _, err := watcher.TryLock(ctx, "watched-2"); !errors.Is(err, redlock.ErrNoPermission) {
		t.Errorf("TryLock as the read-only user: %v, want ErrNoPermission", err)
	}
}
