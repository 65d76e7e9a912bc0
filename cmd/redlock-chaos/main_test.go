package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/procguard"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	procguard.Main() // nodes up's guardian is this test binary
	goleak.VerifyTestMain(m)
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"chaos", "-h"}, {"nodes", "up", "-h"}} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err != nil {
			t.Errorf("%v: %v, want success", args, err)
		}
	}
	for _, args := range [][]string{{"bogus"}, {"chaos", "-scenario", "nope"}, {"chaos", "-fencing", "maybe"}} {
		var ue usageErr
		if err := run(context.Background(), args, &bytes.Buffer{}); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error (exit 2)", args, err)
		}
	}
}

// One short scenario end to end: the table, the verdict and the report.
func TestChaosWritesTheReport(t *testing.T) {
	report := filepath.Join(t.TempDir(), "r.html")
	var out bytes.Buffer
	err := run(context.Background(), []string{"chaos", "-scenario", "client-pause", "-fencing", "on",
		"-duration", (1500 * time.Millisecond).String(), "-report", report}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	html, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "client-pause") || !strings.Contains(string(html), "<svg") {
		t.Fatalf("no table or no timeline:\n%s", out.String())
	}
}
