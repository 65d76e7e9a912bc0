package lease

import (
	"errors"
	"slices"
)

// admit reports whether node i's vote counts in attempt l (in round 1 or
// the commit), given the fencing id it answered with (fenced; ignored
// without fencing), by the deployment's view of the node list (l.list). A
// fenced reply passed the roster check on the node. Its id must be the one
// the check saw there or, for a node the check did not see intact (down,
// or being repaired then), one no other node holds: an attempt counts each
// member of the deployment once, however many addresses lead to it.
func (l *Lease) admit(i int, id int) bool {
	v := l.list
	if !l.e.Fencing {
		// Without fencing a node shows no identity in its replies. One
		// silent at the check counts, and its reply starts a check, which
		// refuses the list if it is another address of a listed server.
		// Holding its vote until then failed most attempts under load (256
		// clients: 1,180 of 2,000), so a server listed twice and silent at
		// the first check can count twice until that check ends
		// (docs/fencing.md, "What is not covered").
		if !v.Seen[i] {
			l.e.Deployment.Recheck()
		}
		return true
	}
	if v.IDs[i] >= 0 {
		return v.IDs[i] == id
	}
	if slices.Contains(v.IDs, id) {
		return false
	}
	l.idsMu.Lock()
	defer l.idsMu.Unlock()
	if l.ids == nil {
		l.ids = make([]int, len(v.IDs))
		for j := range l.ids {
			l.ids[j] = -1
		}
	}
	if l.ids[i] >= 0 || slices.Contains(l.ids, id) {
		return l.ids[i] == id
	}
	l.ids[i] = id
	// To learn it, unless a check since this attempt began saw it: a far
	// node's replies come back long after later checks (its calls queue
	// behind this client's earlier ones on the same name), and each of them
	// started another check, a tenth of a second apart, for as long as the
	// backlog lasted (TestANodeFartherThanTheGraceIsSeenByACheck).
	if !l.e.Deployment.Knows(i, id) {
		l.e.Deployment.Recheck()
	}
	return true
}

// errNotChecked is the Err of a node whose vote does not count until the
// next check of the node list (see internal/identity's nodeList).
var errNotChecked = errors.New("redlock: node not counted: it did not show its identity at the node list check (a new check is under way)")
