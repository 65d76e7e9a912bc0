package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/quorumlock/redlock"
)

// exec on a deployment nobody provisioned used to exit 73, the code for
// "held elsewhere, skip quietly": every cron run was skipped without an
// alert. It exits 69 and says to run `redlock provision`.
func TestExecOnAnUnprovisionedDeploymentExits69(t *testing.T) {
	_, urls := startFreshNodes(t)
	err := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "1s", "job", "--", "true"}, nil)
	if code := exitCode(err); code != 69 || !strings.Contains(err.Error(), "redlock provision") {
		t.Fatalf("exit %d (%v), want 69 telling to run redlock provision", code, err)
	}
}

// With no node reachable, exec used to exit 73 as well (issue 14).
func TestExecWithoutQuorumExits69(t *testing.T) {
	var urls []string
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, "redis://"+l.Addr().String())
		l.Close()
	}
	for _, wait := range []string{"0", "300ms"} {
		err := run(context.Background(), []string{"exec", "--nodes", strings.Join(urls, ","), "--ttl", "1s",
			"--wait", wait, "job", "--", "true"}, nil)
		if code := exitCode(err); code != 69 {
			t.Errorf("--wait %s: exit %d (%v), want 69 (no quorum)", wait, code, err)
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"exec", "-h"}, {"repair", "-h"}, {"provision", "-h"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	if err := run(context.Background(), []string{"bogus"}, &bytes.Buffer{}); exitCode(err) != 2 {
		t.Errorf("unknown command: %v, want exit 2", err)
	}
}

// The operator's binary used to link package testing and the Docker client
// through node/ and chaos/ (issue 14); they moved to cmd/redlock-chaos.
func TestOperatorBinaryLinksNoTestCode(t *testing.T) {
	// go test puts its own GOROOT/bin first in PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.Contains(pkg, "docker") ||
			strings.HasPrefix(pkg, "github.com/quorumlock/redlock/node") || strings.HasPrefix(pkg, "github.com/quorumlock/redlock/chaos") {
			t.Errorf("cmd/redlock links %s", pkg)
		}
	}
}

// Errors printed "redlock: redlock:" (issue 14): the library's prefix,
// wrapped or not, is said once.
func TestErrorLineSaysRedlockOnce(t *testing.T) {
	err := acquireError("x", fmt.Errorf("wrapped: %w", redlock.ErrUnavailable))
	if line := errorLine(err); strings.Count(line, "redlock:") != 1 {
		t.Errorf("%q", line)
	}
	if line := errorLine(redlock.ErrEmptyName); line != "redlock: empty lock name" {
		t.Errorf("%q", line)
	}
}

// exec without the password of requirepass nodes said "the nodes are
// unavailable" (issue 23, 2): the nodes answer a lock script sent before
// AUTH with "ERR Protocol error: unauthenticated multibulk length", which
// is ErrAuth. It exits 69, saying the credentials were refused, at once
// even with --wait.
func TestExecWithoutThePasswordSaysSo(t *testing.T) {
	g, urls := startNodes(t)
	for i, n := range g {
		c := n.NewClient()
		err := c.ConfigSet(context.Background(), "requirepass", "secret").Err()
		c.Close()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	for _, wait := range []string{"0", "1m"} {
		err := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "1s", "--wait", wait,
			"job", "--", "true"}, nil)
		if code := exitCode(err); code != 69 || !strings.Contains(err.Error(), "check the user and password") {
			t.Errorf("--wait %s: exit %d (%v), want 69 saying the credentials were refused", wait, code, err)
		}
	}
}
