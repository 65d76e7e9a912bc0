package waitmodel_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/waitmodel"
)

// The phase-fair rule keeps docs/rwlock.md's bounds on one node, for every
// schedule of up to three writers and three readers taking turns for
// ever: a reader waits for one writer phase at most, no reader gets in
// ahead of a queued writer without having waited through a writer's
// Unlock, and a queued writer waits for the reader phase in progress and
// one per writer ahead of it; and so beside TryLock and TryRLock callers,
// which never wait.
func TestThePhaseFairRuleKeepsItsBounds(t *testing.T) {
	for _, wr := range [][2]int{{1, 1}, {1, 3}, {2, 2}, {3, 2}, {2, 3}, {3, 3}} {
		for _, try := range []bool{false, true} {
			cfg := waitmodel.RWConfig{Writers: wr[0], Readers: wr[1], TryWriter: try, TryReader: try}
			r, err := waitmodel.CheckRW(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d writers, %d readers, the last of each a Try caller %v: %d states", wr[0], wr[1], try, r.States)
			if r.Violation != nil {
				t.Errorf("%+v:\n%s", cfg, strings.Join(r.Violation, "\n"))
			}
		}
	}
}

// Each part of the rule removed breaks a bound: the checker is not
// vacuous, and each part is needed.
func TestEachPartOfThePhaseFairRuleIsNeeded(t *testing.T) {
	for rules, bound := range map[waitmodel.RWRules]string{
		waitmodel.ReaderIgnoresQueue:    "ReaderEntry", // overlapping readers keep a writer out
		waitmodel.NoNextPhase:           "ReaderEntry", // a reader behind a queued writer goes first
		waitmodel.WriterIgnoresAdmitted: "ReaderBound", // writers taking turns keep a reader out
		waitmodel.UnlockPromisesWriter:  "ReaderBound",
		waitmodel.PromiseLast:           "WriterOrder", // writers overtaken by later writers
	} {
		r, err := waitmodel.CheckRW(waitmodel.RWConfig{Writers: 2, Readers: 2, Rules: rules})
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation == nil {
			t.Errorf("%v: no bound broken in %d states", rules, r.States)
			continue
		}
		t.Logf("%v:\n%s", rules, strings.Join(r.Violation, "\n"))
		if !strings.HasPrefix(r.Violation[0], bound) {
			t.Errorf("%v broke %q, want %s", rules, r.Violation[0], bound)
		}
		golden(t, filepath.Join("testdata", "rw_"+rules.String()+".txt"), strings.Join(r.Violation, "\n")+"\n")
	}
}

var update = flag.Bool("update", false, "rewrite the golden counterexamples under testdata/")

// golden compares a counterexample with its file under testdata/ (the
// search is deterministic: breadth first, events in a fixed order, so the
// shortest trace found is always the same), or rewrites the file with
// -update. A change to the model that changes a counterexample shows in
// review as a change to that file.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s: the counterexample changed (go test -update rewrites it):\n--- want\n%s--- got\n%s", path, want, got)
	}
}
