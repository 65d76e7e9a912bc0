package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/node"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startNodes(t *testing.T) (node.Group, string) {
	t.Helper()
	g, err := node.StartProcesses(context.Background(), 3, node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	urls := make([]string, len(g))
	for i, n := range g {
		urls[i] = "redis://" + n.Addr()
	}
	return g, strings.Join(urls, ",")
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestExecPassesTokenAndExitCode(t *testing.T) {
	_, urls := startNodes(t)
	err := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "1s", "job", "--",
		"sh", "-c", `test "$REDLOCK_NAME" = job && test "$REDLOCK_TOKEN" -gt 0 && exit 3`}, nil)
	if code := exitCode(err); code != 3 {
		t.Fatalf("exit code %d (%v), want the child's 3", code, err)
	}
}

func TestExecRunsOnExactlyOneHost(t *testing.T) {
	_, urls := startNodes(t)
	var wg sync.WaitGroup
	var first error
	wg.Go(func() {
		first = run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "2s", "cron", "--", "sleep", "1"}, nil)
	})
	time.Sleep(300 * time.Millisecond)
	second := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "2s", "cron", "--", "true"}, nil)
	wg.Wait()
	if code := exitCode(second); code != 73 {
		t.Errorf("second host: exit %d (%v), want 73 (lock held)", code, second)
	}
	if first != nil {
		t.Errorf("first host: %v", first)
	}
}

func TestExecStopsTheChildWhenTheLockIsLost(t *testing.T) {
	g, urls := startNodes(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "600ms", "--grace", "1s",
			"lost", "--", "sleep", "10"}, nil)
	}()
	time.Sleep(300 * time.Millisecond)
	for _, n := range g { // the keys vanish, as if a node's clock jumped
		c := n.NewClient()
		c.Del(context.Background(), "redlock:{lost}")
		c.Close()
	}
	err := <-done
	if code := exitCode(err); code != 75 {
		t.Fatalf("exit %d (%v), want 75 (lock lost)", code, err)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("the child ran for %v after the lock was lost", took)
	}
}
