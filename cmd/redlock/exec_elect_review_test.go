package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/proctest"
)

// Found by an adversarial review (fixed: the guardian's deadline moves as
// soon as exec sees the keep-alive moved Until): exec --elect moved the guardian's deadline only on
// its own ticks (every TTL/3 from the job's start, Extend being a no-op
// for a leadership), reading the leadership's Until then; the keep-alive
// extends on its own schedule. An extension held up by a paused majority
// that lands just after exec's tick at 2 TTL/3 (and before the "ahead"
// check) leaves the guardian's deadline at the first lease's end minus the
// margin: the guardian SIGKILLs the service of a leader that still holds
// its leadership for most of a TTL, with no SIGTERM first, and exec exits
// with the service's 137 (not 75, so --again does not campaign again).
func TestExecElectKeepsAHealthyLeadersServiceAfterASlowExtension(t *testing.T) {
	g, urls := startNodes(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	sigFile := filepath.Join(dir, "sig")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- exitCode(run(ctx, []string{"exec", "--nodes", urls, "--ttl", "3s", "--grace", "500ms", "--elect",
			"--value", "a", "svc", "--", "sh", "-c", `echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; trap 'echo term > "$1"; exit 0' TERM; while true; do sleep 0.02; done`,
			pidFile, sigFile}, nil))
	}()
	pid, _ := strconv.Atoi(waitFile(t, pidFile))
	start := time.Now()

	clients, err := dialNodes(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	c, err := redlock.New(clients, redlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e, err := c.Election("svc")
	if err != nil {
		t.Fatal(err)
	}
	// Pause two nodes across the keep-alive's first extension (at about
	// TTL/3) until just after exec's second tick (2 TTL/3): the extension
	// is answered then, and the lease runs to about 4 TTL/3.
	paused := make(chan struct{})
	go func() {
		defer close(paused)
		time.Sleep(time.Until(start.Add(850 * time.Millisecond)))
		for _, n := range g[:2] {
			_ = n.Pause(context.Background())
		}
		time.Sleep(time.Until(start.Add(2100 * time.Millisecond)))
		for _, n := range g[:2] {
			_ = n.Resume(context.Background())
		}
	}()
	<-paused
	var last redlock.LeaderInfo
	var lastAt time.Time
	for time.Since(start) < 3500*time.Millisecond {
		if !proctest.Running(pid) {
			code := <-done
			_, sigErr := os.Stat(sigFile)
			t.Fatalf("the leader's service ended %v after its start (exit %d, SIGTERM seen: %v), while a Leader reading "+
				"%v before showed its leadership (term %d) with %v left",
				time.Since(start).Round(time.Millisecond), code, sigErr == nil, time.Since(lastAt).Round(time.Millisecond),
				last.Term, last.Remaining.Round(time.Millisecond))
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		if info, err := e.Leader(rctx); err == nil {
			last, lastAt = info, time.Now()
		}
		rcancel()
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// Found by an adversarial review (fixed: exec marks its own 75): --again campaigns again "after losing the leadership";
// runElected tells a loss by exit code 75 alone, so a service that exits
// 75 by itself (EX_TEMPFAIL) while its host still leads is taken for a
// lost leadership: exec resigns, campaigns again and restarts it every
// ObservePoll(TTL), forever, instead of ending with the service's code.
func TestExecElectAgainEndsWithTheServicesOwn75(t *testing.T) {
	_, urls := startNodes(t)
	runs := filepath.Join(t.TempDir(), "runs")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	start := time.Now()
	code := exitCode(run(ctx, []string{"exec", "--nodes", urls, "--ttl", "2s", "--elect", "--again", "--value", "a",
		"svc", "--", "sh", "-c", `echo run >> "$0"; exit 75`, runs}, nil))
	b, _ := os.ReadFile(runs)
	n := len(b) / len("run\n")
	if n != 1 || ctx.Err() != nil {
		t.Fatalf("a service that exited 75 by itself while leading was run %d times in %v (exec: exit %d, ctx ended: %v); "+
			"want one run and exec ending with its 75", n, time.Since(start).Round(time.Millisecond), code, ctx.Err() != nil)
	}
}
