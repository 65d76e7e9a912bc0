package lease

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Failure is why an operation on the quorum failed: what the root package
// turns into its *QuorumError (same fields), with what Lock's retry loop
// reads of it.
type Failure struct {
	Op    string // "lock", "lock (commit)", "extend" or "unlock"
	Name  string
	Kind  error
	Cause error // the context error that cut the operation short, or nil
	Nodes []round.NodeResult
	// LostToPromises: an acquisition lost only to promises made to other
	// waiters (lostToPromises).
	LostToPromises bool
	// Promised: nodes refused it while free, promised to other waiters (a
	// semaphore's: others ahead in its line), whether or not it was lost
	// to them alone.
	Promised int
	// After: per node, closed once the failed attempt's call there ended
	// (Lock's leave goes after it). Own: this client had a release or
	// rollback of the name in flight, so its refusals may be its own.
	After []chan struct{}
	Own   bool
}

func (f *Failure) Error() string {
	return fmt.Sprintf("redlock: %s %q: %v: %v [%s]", f.Op, f.Name, f.Kind, f.Cause, Summarize(f.Nodes))
}

// Answer runs a call whose script answers 1 (done: NodeGranted) or 0 (not
// done: NodeRefused), as the acquisition, release and extension scripts do.
// A client that panics fails the call: the rollbacks and the release's
// retries call it on goroutines of their own, outside any round, where a
// panic would end the process (a review's replay,
// TestARollbackOnAPanickingClientFailsOnlyThatNode).
func Answer(ctx context.Context, call *nodescript.Call, node redis.UniversalClient) (o round.Outcome, v int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, v, err = round.NodeFailed, 0, fmt.Errorf("%w: %v", round.ErrBadNode, p)
		}
	}()
	return parseAnswer(call.Run(ctx, node))
}

// parseAnswer is Answer's outcome of cmd.
func parseAnswer(cmd *redis.Cmd) (round.Outcome, int64, error) {
	n, err := cmd.Int64()
	switch {
	case err != nil:
		return round.NodeFailed, 0, err
	case n == 1:
		return round.NodeGranted, 0, nil
	default:
		return round.NodeRefused, 0, nil
	}
}

// lostToPromises reports a waiter's attempt that some nodes granted and
// that so many nodes refused because the free lock was promised to other
// waiters that this one cannot be promised a majority. Waiters that joined
// at the same moment can stand in the nodes' queues in different orders,
// and a release then promises the lock to different waiters on different
// nodes: none of them can take a majority, and all would wait for the
// promises to expire (the promise period), again after each such release.
//
// Only that count says so. A waiter promised a majority may still lose an
// attempt, to a node that answers after the others (the contention grace):
// it must keep its promises and take the lock at its next attempt, or the
// waiters behind it would go first (TestMajorityPromiseSurvivesASlowNode).
// The count includes replies that came after the attempt was decided; each
// is a node promised to another waiter all the same.
func (l *Lease) lostToPromises(t *round.Tally) bool {
	return l.waiter != "" && t.Granted() > 0 && int(l.promisedElsewhere.Load()) > t.N-t.Majority
}

// Summarize renders outcome counts and the distinct errors of the nodes
// that failed, such as "2 granted, 3 failed of 5: dial tcp 10.0.0.3:6379:
// connect: connection refused (node 2); OOM command not allowed when used
// memory > 'maxmemory'. (nodes 3,4)". An operator reads the cause there
// rather than guessing it from the counts.
func Summarize(nodes []round.NodeResult) string {
	var counts [round.NumOutcomes]int
	for _, n := range nodes {
		counts[n.Outcome]++
	}
	parts := make([]string, 0, round.NumOutcomes)
	for o := round.Outcome(0); o < round.NumOutcomes; o++ {
		if counts[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[o], o))
		}
	}
	s := fmt.Sprintf("%s of %d", strings.Join(parts, ", "), len(nodes))
	if causes := failureCauses(nodes); causes != "" {
		s += ": " + causes
	}
	return s
}

// maxCauses and maxCauseLen keep a message readable when every node fails
// differently, or a node's error is long.
const maxCauses, maxCauseLen = 4, 200

// failureCauses lists the distinct errors of the failed nodes, each with
// the nodes that gave it, in node order.
func failureCauses(nodes []round.NodeResult) string {
	type cause struct {
		text  string
		nodes []string
	}
	var causes []cause
	for _, n := range nodes {
		if n.Outcome != round.NodeFailed || n.Err == nil {
			continue
		}
		text := strings.TrimPrefix(n.Err.Error(), "redlock: ")
		if len(text) > maxCauseLen {
			text = strings.ToValidUTF8(text[:maxCauseLen], "") + "..."
		}
		found := false
		for i := range causes {
			if causes[i].text == text {
				causes[i].nodes = append(causes[i].nodes, strconv.Itoa(n.Node))
				found = true
				break
			}
		}
		if !found {
			causes = append(causes, cause{text, []string{strconv.Itoa(n.Node)}})
		}
	}
	parts := make([]string, 0, min(len(causes), maxCauses)+1)
	for i, c := range causes {
		if i == maxCauses {
			parts = append(parts, fmt.Sprintf("%d more", len(causes)-maxCauses))
			break
		}
		which := "node "
		if len(c.nodes) > 1 {
			which = "nodes "
		}
		parts = append(parts, fmt.Sprintf("%s (%s%s)", c.text, which, strings.Join(c.nodes, ",")))
	}
	return strings.Join(parts, "; ")
}
