package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitFile waits, for 10 s at most, until path holds a line, and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	for range 500 {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not written in 10 s", filepath.Base(path))
	return ""
}

// exec --elect (issue 36): the first host runs its service with its term;
// a second waits in line, its service not started; when the first is
// stopped (as by SIGTERM) it resigns and the second runs at once with a
// greater term. A leader that loses its nodes has its service stopped
// (SIGTERM) and exits 75.
func TestExecElectRunsTheServiceOnlyWhileLeading(t *testing.T) {
	g, urls := startNodes(t)
	dir := t.TempDir()
	service := func(tag string) []string {
		out := filepath.Join(dir, tag)
		return []string{"sh", "-c", `trap 'echo stopped >> ` + out + `.sig; exit 0' TERM; echo "$REDLOCK_TERM" > ` + out + `; while true; do sleep 0.05; done`}
	}
	start := func(ctx context.Context, tag string, extra ...string) chan int {
		done := make(chan int, 1)
		go func() {
			args := append([]string{"exec", "--nodes", urls, "--ttl", "3s", "--grace", "2s", "--elect", "--value", tag}, extra...)
			args = append(append(args, "svc", "--"), service(tag)...)
			done <- exitCode(run(ctx, args, nil))
		}()
		return done
	}
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	doneA := start(ctxA, "a")
	termA, _ := strconv.ParseUint(waitFile(t, filepath.Join(dir, "a")), 10, 64)
	if termA == 0 {
		t.Fatal("the leader's service got no REDLOCK_TERM")
	}
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneB := start(ctxB, "b")
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "b")); err == nil {
		t.Fatal("the second host's service started while the first leads")
	}
	stopA()
	if code := <-doneA; code != 0 {
		t.Errorf("the first leader, stopped: exit %d, want its service's 0", code)
	}
	termB, _ := strconv.ParseUint(waitFile(t, filepath.Join(dir, "b")), 10, 64)
	if termB <= termA {
		t.Errorf("the second leader's term %d, not above the first's %d", termB, termA)
	}
	// The leader loses its nodes: its service is stopped, exit 75.
	for _, n := range g[:2] {
		if err := n.Pause(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case code := <-doneB:
		if code != 75 {
			t.Errorf("a leader that lost its nodes: exit %d, want 75", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the leader's service still runs 15 s after its nodes were paused")
	}
	for _, n := range g[:2] {
		if err := n.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := waitFile(t, filepath.Join(dir, "b.sig")); got != "stopped" {
		t.Errorf("the deposed leader's service: %q, want it stopped by SIGTERM", got)
	}
	for _, args := range [][]string{
		{"exec", "--nodes", urls, "--elect", "--permits", "2", "svc", "--", "true"},
		{"exec", "--nodes", urls, "--value", "x", "svc", "--", "true"},
	} {
		if code := exitCode(run(context.Background(), args, nil)); code != 2 {
			t.Errorf("%v: exit %d, want 2", args[3:5], code)
		}
	}
}
