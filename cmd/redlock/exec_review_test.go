package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Review break 1 (regression from the guardian): the job's environment now
// travels to the guardian as one line per variable, read with a
// bufio.Scanner whose lines are at most 64 KiB. A variable longer than that
// (Linux allows 128 KiB per string; strconv.Quote may also blow a shorter
// binary one up fourfold) makes the guardian's scanner fail, which it takes
// for the parent's end-of-file: it exits, and exec fails with exit 1 ("the
// guardian process ended") without running the job. Before the guardian the
// job got exec's environment, whatever its size.
func TestReviewExecPassesALargeEnvironmentVariable(t *testing.T) {
	_, urls := startNodes(t)
	cmd := exec.Command(redlockBinary(t), "exec", "--nodes", urls, "--ttl", "2s", "bigenv", "--",
		"sh", "-c", `test ${#BIG} -eq 70000`)
	cmd.Env = append(os.Environ(), "BIG="+strings.Repeat("x", 70000))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Errorf("exit %d, want 0: the job did not get its 70 000-byte variable\n%s", code, out)
	}
}

// Review break 2 (the documented guarantee "the group gets SIGTERM, then
// SIGKILL --grace later, when the lock is lost (at the latest when the
// validity ends)"): exec STOPPED rather than dead — Ctrl-Z in a terminal
// (SIGTSTP goes to exec's foreground group, not to the guardian's nor the
// job's, which are groups of their own), SIGSTOP, a debugger, a cgroup
// freeze of exec alone — neither extends the lock nor signals the job, and
// the guardian only watches for exec's death. The lock expires, another
// exec takes it and runs its job while the first job still runs: two jobs
// under one lock, with nothing ever killing the first (the test waits 20 s
// for it to go while exec stays stopped).
func TestReviewExecStoppedLetsTheJobOutliveTheLock(t *testing.T) {
	_, urls := startNodes(t)
	dir := t.TempDir()
	first, pids := startJob(t, urls, "stopped", []string{"--grace", "1s"}, "")
	if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Signal(syscall.SIGCONT) })
	// The second exec waits for the lock (TTL 2s) and, once it holds it,
	// records which of the first job's processes still run.
	report := filepath.Join(dir, "overlap")
	second := exec.Command(redlockBinary(t), "exec", "--nodes", urls, "--ttl", "2s", "--wait", "30s", "stopped", "--",
		"sh", "-c", `for p in "$@"; do kill -0 $p 2>/dev/null && echo $p; done > "$0"`, report,
		itoa(pids[0]), itoa(pids[1]), itoa(pids[2]))
	second.Stderr = os.Stderr
	done := make(chan error, 1)
	go func() { done <- second.Run() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second exec: %v", err)
		}
	case <-time.After(60 * time.Second):
		_ = second.Process.Kill()
		t.Fatal("the second exec never ran its job")
	}
	// The lock changed hands. By design the first job may run on --grace
	// (1s) past its validity, as when exec itself stops it; not for ever.
	// exec stays stopped: waitGone fails if nothing kills the job.
	if b, err := os.ReadFile(report); err == nil && len(strings.Fields(string(b))) > 0 {
		t.Logf("the first job's processes %v ran while the second exec held the lock", strings.Fields(string(b)))
	}
	waitGone(t, pids, 20*time.Second)
}

func itoa(n int) string { return strconv.Itoa(n) }

// Review break 3: exec exits 78 when --nodes is not the deployment's node
// list (acquireError; docs/fencing.md says so), but exec's own help, whose
// "Exit codes" list is what a cron wrapper is written from, does not list
// it: a wrapper would take it for "anything else".
func TestReviewExecHelpListsExit78(t *testing.T) {
	out, _, code := runBinary(t, redlockBinary(t), "exec", "-h")
	if code != 0 || !strings.Contains(out, "\n  78 ") {
		t.Errorf("exec -h (exit %d) does not list exit code 78 (wrong node list):\n%s", code, out)
	}
}
