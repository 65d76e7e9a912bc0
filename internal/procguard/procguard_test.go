package procguard

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/proctest"

	"go.uber.org/goleak"
)

// parentEnv makes this test binary the parent of
// TestParentDeathKillsTheGroupAndRemovesThePaths: it starts a guardian, gives
// it the directory named by the variable and a job, prints the job's pids
// and waits to be killed.
const parentEnv = "PROCGUARD_TEST_PARENT_DIR"

func TestMain(m *testing.M) {
	Main()
	if dir := os.Getenv(parentEnv); dir != "" {
		os.Exit(beParent(dir))
	}
	goleak.VerifyTestMain(m)
}

func beParent(dir string) int {
	pids := filepath.Join(dir, "pids")
	g, err := Start([]string{"sh", "-c", `sleep 300 & echo $! >> "$0"; echo $$ >> "$0"; wait`, pids})
	if err == nil {
		err = g.Remove(dir)
	}
	if err == nil {
		_, err = g.Run(nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Until killed. Not select{}: with no other goroutine left to wake it,
	// the runtime calls that a deadlock and exits (seen with go1.26.8).
	for {
		time.Sleep(time.Hour)
	}
}

func TestWaitReportsTheJobsStatus(t *testing.T) {
	for _, c := range []struct {
		script string
		code   int
		sig    syscall.Signal
	}{{"exit 3", 3, 0}, {"kill -TERM $$", 0, syscall.SIGTERM}, {"test \"$PROCGUARD_X\" = y", 0, 0}} {
		g, err := Start([]string{"sh", "-c", c.script})
		if err != nil {
			t.Fatal(err)
		}
		pgid, err := g.Run(append(os.Environ(), "PROCGUARD_X=y"))
		if err != nil || pgid <= 0 {
			t.Fatalf("%s: Run: %d, %v", c.script, pgid, err)
		}
		ws, err := g.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if ws.ExitStatus() != c.code && !(c.sig != 0 && ws.Signaled() && ws.Signal() == c.sig) {
			t.Errorf("%s: wait status %#x, want exit %d or signal %v", c.script, uint32(ws), c.code, c.sig)
		}
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestRunReportsAJobThatCannotStart(t *testing.T) {
	g, err := Start([]string{filepath.Join(t.TempDir(), "missing")})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var se *StartError
	if _, err := g.Run(nil); !errors.As(err, &se) {
		t.Fatalf("Run: %v, want a *StartError", err)
	}
}

// A parent that cleaned up disarms its guardian: nothing is removed.
func TestCloseDisarms(t *testing.T) {
	dir := t.TempDir()
	g, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the disarmed guardian removed %s: %v", dir, err)
	}
}

// The point of the package: the parent SIGKILLed, the job's whole process
// group dies and the paths go.
func TestParentDeathKillsTheGroupAndRemovesThePaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "guarded")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"="+dir)
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		parent.Process.Kill()
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	for deadline := time.Now().Add(20 * time.Second); len(pids) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not record its pids (%v)", pids)
		}
		pids = proctest.ReadPids(filepath.Join(dir, "pids"))
	}
	parent.Process.Kill()
	parent.Wait()
	start := time.Now()
	for deadline := start.Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := os.Stat(dir)
		alive := 0
		for _, p := range pids {
			if proctest.Running(p) {
				alive++
			}
		}
		if alive == 0 && errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the parent's SIGKILL: %d of %v running, directory: %v", alive, pids, err)
		}
	}
	t.Logf("job and directory gone %v after the parent's SIGKILL was reaped", time.Since(start))
}
