package waitmodel_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/waitmodel"
)

const a, b, c = 0, 1, 2

// overlappingTurns is issue 34's replay (TestAMultiLockIsNotStarvedByOverlappingTurnsOnTwoMembers):
// M waits for {a, b}; two Lock callers take turns on a, two on b, each
// rejoining the end of its line after its turn.
func overlappingTurns(r waitmodel.Rules) waitmodel.Config {
	return waitmodel.Config{Names: 2, Rules: r, Actors: []waitmodel.Actor{
		{Name: "A1", Set: []int{a}, Holding: true, Turns: true},
		{Name: "B1", Set: []int{b}, Holding: true, Turns: true},
		{Name: "A2", Set: []int{a}, Turns: true},
		{Name: "B2", Set: []int{b}, Turns: true},
		{Name: "M", Set: []int{a, b}},
	}}
}

const target = 4 // M

// threeMultiLocks: M1 {a,b}, M2 {b,c}, M3 {c,a}, oldest first, each name
// held at the start by a caller that releases it once; a Lock waiter on a
// behind them.
func threeMultiLocks(r waitmodel.Rules) waitmodel.Config {
	return waitmodel.Config{Names: 3, Rules: r, Actors: []waitmodel.Actor{
		{Name: "Xa", Set: []int{a}, Holding: true},
		{Name: "Xb", Set: []int{b}, Holding: true},
		{Name: "Xc", Set: []int{c}, Holding: true},
		{Name: "M1", Set: []int{a, b}},
		{Name: "M2", Set: []int{b, c}},
		{Name: "M3", Set: []int{c, a}},
		{Name: "L", Set: []int{a}},
	}}
}

func check(t *testing.T, cfg waitmodel.Config, target int) waitmodel.Result {
	t.Helper()
	r, err := waitmodel.Check(cfg, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %d states", cfg.Rules, r.States)
	return r
}

// The rule (lua/multi_wait.lua's keepsPromises) starves no multi-lock that
// has waited its TTL, and nothing is ever stuck.
func TestTheKeepRuleNeitherStarvesNorDeadlocks(t *testing.T) {
	r := check(t, overlappingTurns(waitmodel.Keep), target)
	if r.Starved != nil {
		t.Errorf("M starved:\n%s", strings.Join(r.Starved, "\n"))
	}
	if r.Stuck != nil {
		t.Errorf("stuck:\n%s", strings.Join(r.Stuck, "\n"))
	}
	r = check(t, threeMultiLocks(waitmodel.Keep), -1)
	if r.Stuck != nil {
		t.Errorf("stuck:\n%s", strings.Join(r.Stuck, "\n"))
	}
	for m := 3; m <= 5; m++ {
		if r := check(t, threeMultiLocks(waitmodel.Keep), m); r.Starved != nil {
			t.Errorf("M%d starved:\n%s", m-2, strings.Join(r.Starved, "\n"))
		}
	}
}

// Without the rule (the code before issue 34), overlapping turns on two
// members starve the multi-lock: the checker is not vacuous.
func TestWithoutKeepingOverlappingTurnsStarveAMultiLock(t *testing.T) {
	r := check(t, overlappingTurns(waitmodel.NeverKeep), target)
	if r.Starved == nil {
		t.Fatal("no starvation found with the keep rule removed")
	}
	t.Logf("found:\n%s", strings.Join(r.Starved, "\n"))
	golden(t, filepath.Join("testdata", "multi_NeverKeep_starved.txt"), strings.Join(r.Starved, "\n")+"\n")
}

// Without the age condition, three multi-locks can each keep a member
// another one needs, for ever.
func TestWithoutTheAgeConditionMultiLocksDeadlock(t *testing.T) {
	r := check(t, threeMultiLocks(waitmodel.NoAge), -1)
	if r.Stuck == nil {
		t.Fatal("no deadlock found with the age condition removed")
	}
	t.Logf("found:\n%s", strings.Join(r.Stuck, "\n"))
	golden(t, filepath.Join("testdata", "multi_NoAge_stuck.txt"), strings.Join(r.Stuck, "\n")+"\n")
}

// Two multi-locks sharing b, Lock callers taking turns on all three names:
// neither multi-lock is starved once it has waited its TTL, and nothing is
// stuck.
func TestTwoMultiLocksAmongTurnsOnThreeNames(t *testing.T) {
	if waitmodel.RaceOn {
		t.Skip("64,136 states: run without -race (make test does)")
	}
	cfg := func(r waitmodel.Rules) waitmodel.Config {
		return waitmodel.Config{Names: 3, Rules: r, Actors: []waitmodel.Actor{
			{Name: "A1", Set: []int{a}, Holding: true, Turns: true},
			{Name: "B1", Set: []int{b}, Holding: true, Turns: true},
			{Name: "C1", Set: []int{c}, Holding: true, Turns: true},
			{Name: "B2", Set: []int{b}, Turns: true},
			{Name: "M", Set: []int{a, b}},
			{Name: "N", Set: []int{b, c}},
			{Name: "A2", Set: []int{a}, Turns: true},
			{Name: "C2", Set: []int{c}, Turns: true},
		}}
	}
	for _, m := range []int{4, 5} {
		r := check(t, cfg(waitmodel.Keep), m)
		if r.Starved != nil {
			t.Errorf("%d starved:\n%s", m, strings.Join(r.Starved, "\n"))
		}
		if r.Stuck != nil {
			t.Errorf("stuck:\n%s", strings.Join(r.Stuck, "\n"))
		}
	}
	if r := check(t, cfg(waitmodel.NeverKeep), 4); r.Starved == nil {
		t.Error("no starvation of M found with the keep rule removed")
	}
}
