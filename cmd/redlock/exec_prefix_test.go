package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
)

// exec had no --key-prefix, which doctor, provision and repair have
// (issue 23, item 3): a job could not share locks with services that use
// WithKeyPrefix. Its lock lives under the prefix, where such a client
// finds it held.
func TestExecKeyPrefix(t *testing.T) {
	g, urls := startFreshNodes(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"provision", "--nodes", urls, "--key-prefix", "jobs"}, &out); err != nil {
		t.Fatalf("provision: %v\n%s", err, out.String())
	}
	release := filepath.Join(t.TempDir(), "release")
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"exec", "--nodes", urls, "--key-prefix", "jobs", "--ttl", "2s", "nightly", "--",
			"sh", "-c", `n=0; while [ ! -e "$0" ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done`, release}, nil)
	}()
	clients := g.NewClients()
	defer node.CloseClients(clients)
	lib, err := redlock.New(clients, redlock.WithKeyPrefix("jobs"), redlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	// Wait for exec's lock to appear under the prefix on a majority.
	held := 0
	for deadline := time.Now().Add(10 * time.Second); held < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		held = 0
		for _, c := range clients {
			if n, err := c.Exists(ctx, "jobs:{nightly}").Result(); err == nil && n == 1 {
				held++
			}
		}
	}
	if held < 2 {
		os.WriteFile(release, nil, 0o600)
		t.Fatalf("jobs:{nightly} on %d of 3 nodes, want a majority (exec: %v)", held, <-done)
	}
	for _, c := range clients {
		if n, _ := c.Exists(ctx, "redlock:{nightly}").Result(); n != 0 {
			t.Error("the lock is under the default prefix too")
		}
	}
	if l, err := lib.TryLock(ctx, "nightly"); !errors.Is(err, redlock.ErrLocked) {
		if err == nil {
			l.Unlock(ctx)
		}
		t.Errorf("a client with WithKeyPrefix(\"jobs\"): %v, want ErrLocked while exec holds the lock", err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("exec: %v", err)
	}
}
