package main

import (
	"context"

	"github.com/quorumlock/redlock/internal/proctest"

	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binDir holds the redlock binary the tests build once; TestMain removes it.
var binDir string

var built struct {
	once sync.Once
	path string
	err  error
}

// redlockBinary builds this command, once per test run: a signal sent to
// exec must reach a process of its own, not the test.
func redlockBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			built.err = err
			return
		}
		if binDir, built.err = os.MkdirTemp("", "redlock-bin-"); built.err != nil {
			return
		}
		built.path = filepath.Join(binDir, "redlock")
		if out, err := exec.Command(gobin, "build", "-o", built.path, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// jobScript starts two background sleeps and records its own pid and
// theirs, one per line, in the file "$0"; "$1" is set to "trap" to make the
// whole job ignore SIGTERM (an ignored signal stays ignored in children).
const jobScript = `[ "$1" = trap ] && trap '' TERM
sleep 300 & echo $! >> "$0"
sleep 300 & echo $! >> "$0"
echo $$ >> "$0"
wait`

// startJob runs redlock exec with jobScript as the child and returns it
// with the job's pids, once all three are recorded.
func startJob(t *testing.T, urls, name string, flags []string, scriptArg string) (*exec.Cmd, []int) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pids")
	args := append([]string{"exec", "--nodes", urls, "--ttl", "2s"}, flags...)
	args = append(args, name, "--", "sh", "-c", jobScript, pidFile, scriptArg)
	cmd := exec.Command(redlockBinary(t), args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	for deadline := time.Now().Add(20 * time.Second); len(pids) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not record its pids (have %v)", pids)
		}
		pids = proctest.ReadPids(pidFile)
	}
	return cmd, pids
}

// waitGone waits, up to bound, for every pid to stop running, and returns
// how long that took.
func waitGone(t *testing.T, pids []int, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var left []int
		for _, p := range pids {
			if proctest.Running(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > bound {
			t.Fatalf("still running %v after %v: %v of the job's %v", bound, time.Since(start), left, pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A SIGKILL to exec (kill -9, timeout -s KILL, the OOM killer) used to
// leave the child and its children running without the lock (issue 23,
// item 3): they are in a process group of their own and nothing watched
// for exec's death.
func TestExecKilledTakesItsWholeJobWithIt(t *testing.T) {
	_, urls := startNodes(t)
	cmd, pids := startJob(t, urls, "killed", nil, "")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	took := waitGone(t, pids, 10*time.Second)
	t.Logf("the job's %d processes were gone %v after exec's SIGKILL was reaped", len(pids), took)
}

// A child that ignores SIGTERM used to keep exec waiting, and the lock
// extended, for ever; a second SIGTERM did nothing (issue 23, item 3).
func TestExecEscalatesToSIGKILL(t *testing.T) {
	_, urls := startNodes(t)
	t.Run("after --grace", func(t *testing.T) {
		cmd, pids := startJob(t, urls, "grace", []string{"--grace", "1s"}, "trap")
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code := waitExit(t, cmd, 20*time.Second)
		if code != 128+int(syscall.SIGKILL) {
			t.Errorf("exit %d, want 137: the child ended by SIGKILL", code)
		}
		waitGone(t, pids, 10*time.Second)
	})
	t.Run("at a second signal", func(t *testing.T) {
		cmd, pids := startJob(t, urls, "twice", []string{"--grace", "1h"}, "trap")
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // two signals, not one coalesced
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd, 20*time.Second); code != 128+int(syscall.SIGKILL) {
			t.Errorf("exit %d, want 137: the child ended by SIGKILL", code)
		}
		waitGone(t, pids, 10*time.Second)
	})
}

// waitExit waits up to bound for cmd to exit and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd, bound time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("redlock exec still running %v after the signal", bound)
		return -1
	}
}

// What the command left behind in its group when it exited normally used
// to run on after exec released the lock. It gets SIGTERM, then SIGKILL
// after --grace (here it ignores SIGTERM), before the release; the exit
// code is still the command's.
func TestExecStopsWhatTheCommandLeftBehind(t *testing.T) {
	_, urls := startNodes(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	err := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "2s", "--grace", "1s", "left", "--",
		"sh", "-c", `trap '' TERM; sleep 300 & echo $! > "$0"; exit 4`, pidFile}, nil)
	if code := exitCode(err); code != 4 {
		t.Errorf("exit %d (%v), want the command's 4", code, err)
	}
	pids := proctest.ReadPids(pidFile)
	if len(pids) != 1 {
		t.Fatalf("pids %v", pids)
	}
	t.Cleanup(func() { syscall.Kill(pids[0], syscall.SIGKILL) })
	if proctest.Running(pids[0]) {
		t.Errorf("the background sleep %d still runs after exec released the lock", pids[0])
	}
}

// If the guardian itself is killed, nothing watches the job for exec's
// death any more: exec kills the job's group and exits 1.
func TestExecKillsTheJobWhenItsGuardianDies(t *testing.T) {
	_, urls := startNodes(t)
	cmd, pids := startJob(t, urls, "orphan", nil, "")
	// Any of exec's threads may have forked it.
	lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cmd.Process.Pid))
	if len(lists) == 0 {
		t.Skip("no /proc children lists")
	}
	var children []string
	for _, f := range lists {
		b, _ := os.ReadFile(f)
		children = append(children, strings.Fields(string(b))...)
	}
	if len(children) != 1 {
		t.Fatalf("exec's children: %v, want the guardian alone", children)
	}
	guardian, _ := strconv.Atoi(children[0])
	if err := syscall.Kill(guardian, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 20*time.Second); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	waitGone(t, pids, 10*time.Second)
}
