package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/procguard"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// A SIGTERM that reaches exec after the lock is taken but before
// holdWhileRunning listens for signals cancels only the command's context:
// no signal would ever reach the job. The replay hands holdWhileRunning a
// context already cancelled by a signal, as that SIGTERM leaves it. Before
// the fix the job started (it created its file) and ran unsignalled; now
// nothing starts, exec exits 143 and the lock is released.
func TestExecSignalledBeforeTheStartStartsNothing(t *testing.T) {
	g, _ := startNodes(t)
	var clients []redis.UniversalClient
	for _, n := range g {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: n.Addr()}))
	}
	t.Cleanup(func() { node.CloseClients(clients) })
	c, err := redlock.New(clients, redlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	file := filepath.Join(t.TempDir(), "started")
	child := []string{"sh", "-c", "touch " + file}
	guard, err := procguard.Start(child)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(context.Background(), "gap")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(signalled{syscall.SIGTERM})
	err = holdWhileRunning(ctx, l, guard, child, holding{ttl: 5 * time.Second, grace: time.Second})
	if code := exitCode(err); code != 143 {
		t.Errorf("exit %d (%v), want 143: SIGTERM came before the command started", code, err)
	}
	time.Sleep(200 * time.Millisecond) // a job that was started would have touched its file by now
	if _, err := os.Stat(file); err == nil {
		t.Errorf("the command started although exec was told to stop before it")
	}
	l2, err := c.TryLock(context.Background(), "gap")
	if err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
	_ = l2.Unlock(context.Background())
}
