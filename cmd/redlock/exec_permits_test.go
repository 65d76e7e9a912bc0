package main

import (
	"context"
	"os"
	"path/filepath"
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
	err = run(context.Background(), []string{"exec", "--nodes", urls, "--permits", "2", "--name-per-tick", "1m", "report", "--", "true"}, nil)
	if code := exitCode(err); code != 2 {
		t.Errorf("--permits with --name-per-tick: exit %d (%v), want 2", code, err)
	}
	err = run(context.Background(), []string{"exec", "--nodes", urls, "--permits", "-1", "report", "--", "true"}, nil)
	if code := exitCode(err); code != 2 {
		t.Errorf("--permits -1: exit %d (%v), want 2", code, err)
	}
}
