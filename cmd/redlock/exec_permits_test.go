package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// --permits K: at most K of the job at once. With K=2 and three callers
// while the first two run, the third exits 73 (all permits taken); each
// running job gets its slot and the slot's name to fence with. A caller
// with another K is told so (78), and a bad K is a bad flag (2).
func TestExecPermitsRunsAtMostKAtOnce(t *testing.T) {
	_, urls := startNodes(t)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			out := filepath.Join(dir, "slot"+string(rune('a'+i)))
			err := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "2s", "--permits", "2", "report", "--",
				"sh", "-c", `echo "$REDLOCK_SLOT $REDLOCK_NAME $REDLOCK_TOKEN" > ` + out + `; while [ ! -e ` + release + ` ]; do sleep 0.05; done`}, nil)
			codes[i] = exitCode(err)
		})
	}
	// Both jobs hold a permit once both have written their slot.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, ea := os.Stat(filepath.Join(dir, "slota"))
		_, eb := os.Stat(filepath.Join(dir, "slotb"))
		if ea == nil && eb == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two permitted jobs did not both start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	err := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "2s", "--permits", "2", "report", "--", "true"}, nil)
	if code := exitCode(err); code != 73 {
		t.Errorf("a third job while two hold the 2 permits: exit %d (%v), want 73", code, err)
	} else if msg := err.Error(); !strings.Contains(msg, `all 2 permits of the semaphore "report"`) {
		// issue 35: it said `"report" is held elsewhere`, naming neither
		// the semaphore nor K.
		t.Errorf("the busy message names neither the semaphore nor K: %v", err)
	}
	err = run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "2s", "--permits", "3", "report", "--", "true"}, nil)
	if code := exitCode(err); code != 78 {
		t.Errorf("a job with --permits 3 where 2 are stored: exit %d (%v), want 78", code, err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Errorf("the permitted jobs exited %v, want 0, 0", codes)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "slota"))
	b, _ := os.ReadFile(filepath.Join(dir, "slotb"))
	if string(a) == string(b) || len(a) < len("0 report#0 1") {
		t.Errorf("the jobs' slots: %q and %q, want two different slots with their names and tokens", a, b)
	}
	for _, k := range []string{"-1", "0"} { // 0 silently took the plain lock (issue 35)
		err = run(context.Background(), []string{"exec", "--nodes", urls, "--permits", k, "report", "--", "true"}, nil)
		if code := exitCode(err); code != 2 {
			t.Errorf("--permits %s: exit %d (%v), want 2", k, code, err)
		}
	}
}

// --permits with --name-per-tick: K runs in a tick, each keeping its
// permit of the tick's semaphore until it expires (issue 35: the two flags
// excluded each other).
func TestExecPermitsPerTick(t *testing.T) {
	_, urls := startNodes(t)
	tick := []string{"exec", "--nodes", urls, "--ttl", "5s", "--permits", "2", "--name-per-tick", "1h", "nightly", "--", "true"}
	var codes []int
	began := time.Now().UTC().Truncate(time.Hour)
	for range 3 {
		codes = append(codes, exitCode(run(context.Background(), tick, nil)))
	}
	// The third of one tick finds both permits kept (unless the hour
	// turned between the runs: then it had a tick of its own).
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("the first two runs of a tick exited %v, want 0, 0", codes[:2])
	}
	if sameTick := time.Now().UTC().Truncate(time.Hour).Equal(began); codes[2] != 73 && sameTick {
		t.Errorf("a third run in the tick with --permits 2: exit %d, want 73", codes[2])
	}
}
