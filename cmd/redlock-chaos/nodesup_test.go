package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/proctest"

	"github.com/redis/go-redis/v9"
)

// `redlock-chaos nodes up` left its nodes' data directories behind when it
// was SIGKILLed (issue 23, item 6). Its directories and its redis-server
// processes go with it.
func TestNodesUpKilledLeavesNothingBehind(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "redlock-chaos")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "nodes", "up", "-n", "3", "--json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var nodes struct{ Nodes []string }
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &nodes)
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("nodes up printed %q: %v", line, err)
	}
	var dirs []string
	var pids []int
	for _, u := range nodes.Nodes {
		dir, pid := nodeDirAndPid(t, u)
		dirs, pids = append(dirs, dir), append(pids, pid)
	}
	t.Cleanup(func() {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	start := time.Now()
	for {
		var left []string
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				left = append(left, d)
			}
		}
		for _, p := range pids {
			if proctest.Running(p) {
				left = append(left, fmt.Sprintf("redis-server %d", p))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("10 s after nodes up was killed, still there: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d directories and servers gone %v after nodes up's SIGKILL was reaped", len(dirs), time.Since(start))
}

// nodeDirAndPid asks the node at url for its data directory and its pid.
func nodeDirAndPid(t *testing.T, url string) (string, int) {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx := context.Background()
	cfg, err := c.ConfigGet(ctx, "dir").Result()
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return cfg["dir"], pid
		}
	}
	t.Fatal("no process_id in INFO server")
	return "", 0
}
