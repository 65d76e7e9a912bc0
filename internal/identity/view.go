package identity

import "github.com/quorumlock/redlock/internal/round"

// View is what one check of the node list found: the lease engine counts
// an attempt's votes by it.
type View struct {
	Err    error              // a *NodeListError, or nil
	Kind   error              // what no retry fixes, if every node failed so (ErrAuth...)
	Nodes  []round.NodeResult // the check's outcome on each node
	Roster any                // fenced: the deployment's roster, boxed for the scripts; "" if none
	IDs    []int              // fenced: per node, the id it showed while intact; -1 none
	Seen   []bool             // per node: it answered the check
}
