package chaos_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/chaos"
	"github.com/quorumlock/redlock/node"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The harness as the project's acceptance test: every scenario, with and
// without fencing, a few seconds each, must show what docs/chaos.md says.
func TestScenarios(t *testing.T) { runAll(t, chaos.Processes{}, 3*time.Second) }

// The same in Docker containers built from the host's redis-server.
func TestScenariosInContainers(t *testing.T) {
	node.RequireDocker(t)
	runAll(t, chaos.Containers{}, 3*time.Second)
}

func runAll(t *testing.T, backend chaos.Backend, d time.Duration) {
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	var results []*chaos.Result
	for _, s := range chaos.Scenarios {
		for _, fenced := range []bool{false, true} {
			r, err := chaos.Run(context.Background(), chaos.Config{Scenario: s, Fenced: fenced, Duration: d, Backend: backend})
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			results = append(results, r)
			if !r.Verdict.OK {
				t.Errorf("%s, fenced %v: %s", s.Name, fenced, r.Verdict.Text)
			}
		}
	}
	var out bytes.Buffer
	chaos.WriteTable(&out, results)
	chaos.WriteEvidence(&out, results)
	t.Log("\n" + out.String())

	var html bytes.Buffer
	if err := chaos.WriteHTML(&html, results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "client paused", "clock +2xTTL", "stale"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// One short run on real nodes, checked by both the hand-written checkers
// and porcupine: the new link faults (jitter, a bandwidth limit, resets,
// half-open links) on a minority, with fencing.
func TestRealRunCheckedByBoth(t *testing.T) {
	s, _ := chaos.Lookup("jittery-links")
	r, err := chaos.Run(context.Background(), chaos.Config{Scenario: s, Fenced: true, Duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	chaos.WriteEvidence(&out, []*chaos.Result{r})
	t.Log("\n" + out.String())
	if !r.Verdict.OK || r.Findings.StaleAccepted > 0 {
		t.Errorf("verdict %q, %d stale writes accepted", r.Verdict.Text, r.Findings.StaleAccepted)
	}
	if len(r.Models) != 2 {
		t.Fatalf("porcupine checked %d models, want 2", len(r.Models))
	}
	for _, m := range r.Models {
		if m.Result != "Ok" || m.Ops == 0 {
			t.Errorf("porcupine, %s", m)
		}
	}
	var faults []string
	for _, f := range r.History.Faults {
		faults = append(faults, f.What)
	}
	for _, want := range []string{"latency 15±15ms", "bandwidth 32KB/s", "connections reset", "half-open"} {
		if !strings.Contains(strings.Join(faults, "|"), want) {
			t.Errorf("no %q fault in the run: %v", want, faults)
		}
	}
}
