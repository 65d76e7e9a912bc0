package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The inspect subcommand's edges (from the adversarial review of 8959cf9):
// flags after names, --permits 0, names refused, wrong types under --rw and
// --permits, JSON on every exit, a majority paused.
func TestInspectCLIEdges(t *testing.T) {
	g, urls, clients, _, l := inspectedNodes(t)
	ctx := context.Background()

	inspect := func(ctx context.Context, args ...string) (string, int, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"inspect", "--nodes", urls}, args...), &out)
		return out.String(), exitCode(err), err
	}
	report := func(what string, args ...string) (string, int) {
		out, code, err := inspect(ctx, args...)
		t.Logf("%s: inspect %q -> exit %d, err %v\n%s", what, args, code, err, out)
		return out, code
	}
	// A flag after the name was taken for a second name (a lock called
	// "--json"), and the output was text.
	if out, code := report("flag after the name", "job", "--json"); code != 0 || !json.Valid([]byte(out)) || !strings.Contains(out, l.ID()) {
		t.Errorf("inspect job --json: exit %d, want the lock's JSON", code)
	}
	for _, bad := range [][]string{{"--permits", "0", "job"}, {"--permits", "-1", "pool"}, {"--rw", ""}, {"}x"},
		{"--json", "a", "}x"}, {"--permits", "2", "}x"}, {"--permits", "300", "pool"}} {
		if _, code := report("bad input", bad...); code != 2 {
			t.Errorf("inspect %q: exit %d, want 2", bad, code)
		}
	}

	for _, in := range clients {
		rc := in.(*redis.Client)
		rc.SAdd(ctx, "redlock:{wrw}:rw:readers", "x")
		rc.HSet(ctx, "redlock:{wsem}:permits", "x", "y")
		rc.SAdd(ctx, "redlock:{wm-b}", "x")
	}
	for _, tc := range [][]string{{"--rw", "wrw"}, {"--permits", "2", "wsem"}, {"wm-a", "wm-b"}, {"--json", "--rw", "wrw"}} {
		out, code := report("wrong type", tc...)
		if code != 78 {
			t.Errorf("inspect %q with a key of another type on every node: exit %d, want 78", tc, code)
		}
		if tc[0] == "--json" && !json.Valid([]byte(out)) {
			t.Errorf("invalid JSON: %s", out)
		}
	}

	for _, n := range g[:2] {
		if err := n.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		defer n.Resume(ctx)
	}
	for _, tc := range [][]string{{"--timeout", "100ms", "--json", "--rw", "x"}, {"--timeout", "100ms", "--json", "--permits", "2", "x"}} { // NodeLock's JSON: TestInspectPrintsEveryPrimitiveAndExitsByCause
		start := time.Now()
		out, code := report("2 of 3 paused", tc...)
		t.Logf("took %v", time.Since(start))
		if code != 69 || !json.Valid([]byte(out)) || !strings.Contains(out, `"Err": "`) {
			t.Errorf("inspect %q, 2 of 3 paused: exit %d in %v, want 69 and JSON with the errors", tc, code, time.Since(start))
		}
	}
}
