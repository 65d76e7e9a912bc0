package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/chaos"
)

// One run of the naive token scheme through the harness: the checkers must
// catch it, and must pass the quorum scheme on the same faults.
func TestChaosCheckersCatchTheNaiveTokenScheme(t *testing.T) {
	for _, tc := range []struct {
		name   string
		locker func(*redlock.Client) chaos.Locker
		catch  bool
	}{
		{"quorum tokens", nil, false},
		{"naive max of INCR", func(c *redlock.Client) chaos.Locker {
			return redlock.Naive{Client: c, Variant: redlock.NaiveNoCommit}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := chaos.Run(context.Background(), chaos.Config{Scenario: chaos.Calibration, Fenced: true,
				Workers: 2, Duration: 2 * time.Second, Locker: tc.locker})
			if err != nil {
				t.Fatal(err)
			}
			caught := r.Findings.TokenOrder > 0
			t.Logf("%d acquisitions, %d token-order violations, %d stale rejected; %v",
				len(r.History.Holds), r.Findings.TokenOrder, r.Findings.StaleRejected, r.Verdict)
			if caught != tc.catch {
				t.Fatalf("token-order violations found = %v, want %v", caught, tc.catch)
			}
			if r.Verdict.OK == tc.catch {
				t.Fatalf("verdict %v for %s", r.Verdict, tc.name)
			}
		})
	}
}
