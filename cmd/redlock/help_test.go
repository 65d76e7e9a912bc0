package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// Help asked for goes to stdout with exit 0; `exec -h` and `doctor -h`
// printed it to stderr (issue 23, item 3). A usage error stays on stderr
// with exit 2.
func TestHelpGoesToStdoutAndUsageErrorsToStderr(t *testing.T) {
	bin := redlockBinary(t)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"exec", "-h"}, {"exec", "--help"},
		{"doctor", "-h"}, {"provision", "-h"}, {"repair", "-h"}} {
		stdout, stderr, code := runBinary(t, bin, args...)
		if code != 0 || stderr != "" || !strings.Contains(strings.ToLower(stdout), "usage") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout only", args, code, head(stdout), head(stderr))
		}
	}
	for _, args := range [][]string{{}, {"bogus"}, {"exec", "--bogus"}, {"doctor", "--bogus"}, {"provision", "--bogus"},
		{"repair", "--bogus"}, {"exec", "--nodes", "redis://127.0.0.1:1", "name-without-command"}} {
		stdout, stderr, code := runBinary(t, bin, args...)
		if code != 2 || stdout != "" || stderr == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and the error on stderr only", args, code, head(stdout), head(stderr))
		}
	}
}

func runBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func head(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// `repair --node 7` on a list of three nodes exited 1, where the docs
// promise 2 for bad flags (issue 23, item 3).
func TestRepairNodeOutOfRangeIsAUsageError(t *testing.T) {
	urls := "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3"
	for _, i := range []string{"3", "7"} {
		err := run(context.Background(), []string{"repair", "--nodes", urls, "--node", i}, &bytes.Buffer{})
		if code := exitCode(err); code != 2 {
			t.Errorf("--node %s: exit %d (%v), want 2", i, code, err)
		}
	}
}
