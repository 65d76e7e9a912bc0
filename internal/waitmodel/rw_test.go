package waitmodel_test

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/waitmodel"
)

// The phase-fair rule keeps docs/rwlock.md's bounds on one node, for every
// schedule of up to three writers and three readers taking turns for
// ever: a reader waits for one writer phase at most, no reader gets in
// ahead of a queued writer without having waited through a writer's
// Unlock, and a queued writer waits for the reader phase in progress and
// one per writer ahead of it.
func TestThePhaseFairRuleKeepsItsBounds(t *testing.T) {
	for _, wr := range [][2]int{{1, 1}, {1, 3}, {2, 2}, {3, 2}, {2, 3}, {3, 3}} {
		r, err := waitmodel.CheckRW(waitmodel.RWConfig{Writers: wr[0], Readers: wr[1]})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d writers, %d readers: %d states", wr[0], wr[1], r.States)
		if r.Violation != nil {
			t.Errorf("%d writers, %d readers:\n%s", wr[0], wr[1], strings.Join(r.Violation, "\n"))
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
	}
}
