package verdict

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/quorumlock/redlock/internal/round"
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
	// waiters (the lease engine's lostToPromises).
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
