package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/proctest"
)

// grandchild is a command whose shell starts a sleep in the background,
// writes its pid to a file and waits for it: the orphan issue 14 found.
func grandchild(t *testing.T) (argv []string, pid func() int) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	argv = []string{"sh", "-c", `sleep 300 & echo $! > "$0.tmp" && mv "$0.tmp" "$0"; wait`, pidfile}
	var got int
	pid = func() int {
		for deadline := time.Now().Add(10 * time.Second); got == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			b, err := os.ReadFile(pidfile)
			if err == nil {
				got, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
		}
		if got == 0 {
			t.Fatal("the command never wrote its background pid")
		}
		// Never leave a sleep 300 behind, whatever the outcome.
		t.Cleanup(func() { syscall.Kill(got, syscall.SIGKILL) })
		return got
	}
	return argv, pid
}

// assertGone waits a generous while for pid to end.
func assertGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !proctest.Running(pid) {
			return
		}
	}
	t.Errorf("%s: the background process %d still runs", what, pid)
}

// On lock loss exec signalled only its direct child: the shell died and
// its background sleep ran on, unlocked (issue 14). The whole process
// group gets SIGTERM.
func TestExecStopsTheWholeProcessGroupWhenTheLockIsLost(t *testing.T) {
	g, urls := startNodes(t)
	argv, pid := grandchild(t)
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), append([]string{"exec", "--nodes", urls, "--ttl", "600ms", "--grace", "1s",
			"lost", "--"}, argv...), nil)
	}()
	bg := pid()
	for _, n := range g { // the keys vanish, as if a node's clock jumped
		c := n.NewClient()
		c.Del(context.Background(), "redlock:{lost}")
		c.Close()
	}
	select {
	case err := <-done:
		if code := exitCode(err); code != 75 {
			t.Errorf("exit %d (%v), want 75 (lock lost)", code, err)
		}
	case <-time.After(20 * time.Second):
		syscall.Kill(bg, syscall.SIGKILL)
		t.Fatalf("exec did not end: it waits for a shell whose background sleep still runs")
	}
	assertGone(t, bg, "after the lock was lost")
}

// A caller's cancellation (the interrupt of the exec subcommand) reaches
// the whole group too.
func TestExecPassesACancellationToTheProcessGroup(t *testing.T) {
	_, urls := startNodes(t)
	argv, pid := grandchild(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"exec", "--nodes", urls, "--ttl", "1s", "job", "--"}, argv...), nil)
	}()
	bg := pid()
	cancel()
	select {
	case err := <-done:
		if code := exitCode(err); code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit %d (%v), want %d (the shell ended by SIGTERM)", code, err, 128+int(syscall.SIGTERM))
		}
	case <-time.After(20 * time.Second):
		syscall.Kill(bg, syscall.SIGKILL)
		t.Fatal("exec did not end")
	}
	assertGone(t, bg, "after the interrupt")
}

// A SIGTERM sent to redlock exec itself is passed on to the group.
func TestExecForwardsSIGTERMToTheProcessGroup(t *testing.T) {
	_, urls := startNodes(t)
	// Keep the test binary alive if exec does not listen for the signal.
	mine := make(chan os.Signal, 1)
	signal.Notify(mine, syscall.SIGTERM)
	defer signal.Stop(mine)
	argv, pid := grandchild(t)
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), append([]string{"exec", "--nodes", urls, "--ttl", "1s", "job", "--"}, argv...), nil)
	}()
	bg := pid()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case err := <-done:
		if code := exitCode(err); code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit %d (%v), want %d", code, err, 128+int(syscall.SIGTERM))
		}
	case <-time.After(10 * time.Second):
		syscall.Kill(bg, syscall.SIGKILL)
		t.Fatal("exec did not pass the SIGTERM on: its command still runs")
	}
	assertGone(t, bg, "after SIGTERM")
}
