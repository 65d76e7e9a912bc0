package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// redlock inspect prints what the nodes hold of a lock, a read-write lock,
// a semaphore and several names, as text and as JSON; a majority down
// exits 69 with what the others said, a key of another type 78, a bad
// name 2.
func TestInspectPrintsEveryPrimitiveAndExitsByCause(t *testing.T) {
	g, urls, clients, c, l := inspectedNodes(t)
	ctx := context.Background()
	rw, _ := c.RWMutex("table")
	r, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	s, _ := c.Semaphore("pool", 2)
	p, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)

	inspect := func(args ...string) (string, int) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"inspect", "--nodes", urls}, args...), &out)
		return out.String(), exitCode(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"job"}, []string{"held by " + l.ID(), "token " + strconv.FormatUint(l.Token(), 10)}},
		{[]string{"job", "free-name"}, []string{"job: held by " + l.ID(), "free-name: free"}},
		{[]string{"--rw", "table"}, []string{"writer: free", "readers: 1", r.ID(), "writers queued: 0"}},
		{[]string{"--permits", "2", "pool"}, []string{"size stored: 2 (version 0); free: 1 of 2; waiting: 0", p.ID() + " holds slots [" + itoa(p.Slot()) + "]"}},
	} {
		out, code := inspect(tc.args...)
		for _, w := range tc.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("inspect %v: exit %d, output lacks %q:\n%s", tc.args, code, w, out)
			}
		}
	}
	out, code := inspect("--json", "--permits", "2", "pool")
	var info redlock.SemaphoreInfo
	if err := json.Unmarshal([]byte(out), &info); code != 0 || err != nil || info.Free != 1 || len(info.Holders) != 1 || info.Holders[0].Holder != p.ID() {
		t.Errorf("inspect --json --permits 2 pool: exit %d, %v: %+v\n%s", code, err, info, out)
	}

	if _, code := inspect("--rw", "a", "b"); code != 2 {
		t.Errorf("--rw with two names: exit %d, want 2", code)
	}
	if _, code := inspect(""); code != 2 {
		t.Errorf("an empty name: exit %d, want 2", code)
	}
	for _, in := range clients {
		if err := in.(*redis.Client).RPush(ctx, "redlock:{listed}", "x").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if out, code := inspect("listed"); code != 78 {
		t.Errorf("a lock key of another type: exit %d, want 78:\n%s", code, out)
	}
	for _, n := range g[:2] {
		if err := n.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		defer n.Resume(ctx)
	}
	out, code = inspect("--timeout", "200ms", "--json", "job")
	if code != 69 || !strings.Contains(out, `"Err": "`) {
		t.Errorf("two of three nodes paused: exit %d, want 69 and the nodes' errors in the JSON:\n%s", code, out)
	}
}

// inspectedNodes starts provisioned nodes and returns them, their URLs,
// raw clients to them, a lock client over them, and the lock "job" held by
// it; all are closed when t ends.
func inspectedNodes(t *testing.T) (node.Group, string, []redis.UniversalClient, *redlock.Client, *redlock.Lock) {
	t.Helper()
	g, urls := startNodes(t)
	clients, err := dialNodes(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(clients) })
	c, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l, err := c.TryLock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Unlock(context.Background()) })
	return g, urls, clients, c, l
}
