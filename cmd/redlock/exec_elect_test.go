package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/proctest"
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
			args := append([]string{"exec", "--nodes", urls, "--ttl", "3s", "--grace", "500ms", "--elect", "--value", tag}, extra...)
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
		// The SIGKILL would land after the lease: --grace is at most TTL/3 minus the margin.
		{"exec", "--nodes", urls, "--elect", "--ttl", "3s", "--grace", "2s", "svc", "--", "true"},
	} {
		if code := exitCode(run(context.Background(), args, nil)); code != 2 {
			t.Errorf("%v: exit %d, want 2", args[3:5], code)
		}
	}
}

// The cilium overrun under exec --elect (issue 36): the leading exec is
// stopped (SIGSTOP: a stall, not a death, so its guardian's pipe stays
// open), its service keeps running and ignores SIGTERM. The guardian
// SIGKILLs the service a margin before the lease can pass, so that when
// the next host is elected and its service starts, the stalled leader's
// service is gone: the new service checks that itself as it starts.
// Before, the guardian's deadline was the lease's end plus --grace, and
// the two services ran at once.
func TestExecElectStalledLeadersServiceIsGoneBeforeTheNextLeads(t *testing.T) {
	_, urls := startNodes(t)
	dir := t.TempDir()
	aPid := filepath.Join(dir, "a.pid")
	a := exec.Command(redlockBinary(t), "exec", "--nodes", urls, "--ttl", "2s", "--grace", "600ms", "--elect",
		"--value", "a", "svc", "--", "sh", "-c", `trap '' TERM; echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; while true; do sleep 0.05; done`, aPid)
	a.Stderr = os.Stderr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.Process.Signal(syscall.SIGCONT)
		_ = a.Process.Kill()
		_, _ = a.Process.Wait()
	})
	pid, _ := strconv.Atoi(waitFile(t, aPid))
	if pid == 0 || !proctest.Running(pid) {
		t.Fatalf("the first leader's service is not running (pid %d)", pid)
	}
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	check := filepath.Join(dir, "b.check")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- exitCode(run(ctx, []string{"exec", "--nodes", urls, "--ttl", "2s", "--elect", "--value", "b", "svc", "--",
			"sh", "-c", `if [ -d /proc/$1 ] && ! grep -q '^State:.*Z' /proc/$1/status; then echo overlap; else echo alone; fi > "$0"; exit 0`,
			check, strconv.Itoa(pid)}, nil))
	}()
	if got := waitFile(t, check); got != "alone" {
		t.Errorf("the next leader's service started while the stalled leader's still ran (%s)", got)
	}
	cancel()
	<-done
}
