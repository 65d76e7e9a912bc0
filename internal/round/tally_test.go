package round

import (
	"errors"
	"testing"
)

// counted checks that t counts every node once, by its result.
func counted(t *testing.T, tl *Tally) {
	t.Helper()
	var by [NumOutcomes]int
	for _, r := range tl.Results {
		by[r.Outcome]++
	}
	if by != tl.Counts || tl.Replied != tl.N {
		t.Errorf("counts %v, replied %d; the results say %v of %d", tl.Counts, tl.Replied, by, tl.N)
	}
}

// A commit sent to three nodes of five, one of which failed, then to the
// other three (the failed one again), of which two answered: t counts
// each node by its last answer, and a node neither send heard from as
// NodeNoReply, however the rounds ended.
func TestAWidenedTallyCountsEveryNodeByItsLastAnswer(t *testing.T) {
	first := []bool{true, true, true, false, false}
	tl := NewTally(5)
	tl.add(Reply{Node: 0, Outcome: NodeGranted, Sent: true})
	tl.add(Reply{Node: 1, Outcome: NodeGranted, Sent: true})
	tl.add(Reply{Node: 2, Outcome: NodeFailed, Err: errors.New("down"), Sent: true})
	tl.add(Reply{Node: 3, Outcome: NodeTimedOut, Err: ErrNodeHung}) // skipped
	// node 4's skip was not collected before the round ended
	rest := []bool{false, false, true, true, true}
	w := NewTally(5)
	w.add(Reply{Node: 3, Outcome: NodeGranted, Sent: true})
	w.add(Reply{Node: 2, Outcome: NodeGranted, Sent: true})
	tl.Widen(w, rest)
	counted(t, tl)
	if !tl.Won() || tl.Granted() != 4 || tl.Results[4].Outcome != NodeNoReply || tl.Answered != 5 {
		t.Errorf("widened: %+v, answered %d", tl.Results, tl.Answered)
	}

	won := NewTally(5)
	for i := range 3 {
		won.add(Reply{Node: i, Outcome: NodeGranted, Sent: true})
	}
	won.add(Reply{Node: 3, Outcome: NodeTimedOut, Err: ErrNodeHung}) // skipped; node 4's not collected
	won.NotAsked(first)
	counted(t, won)
	if won.Results[3].Err != nil || won.Counts[NodeNoReply] != 2 || won.Heard[3] {
		t.Errorf("not asked: %+v", won.Results)
	}
}
