package round

import "time"

// Outcome is what one node answered to one call.
type Outcome uint8

const (
	// NodeNoReply: the operation was decided before this node answered. Its
	// call goes on in the background until the node timeout.
	NodeNoReply Outcome = iota
	// NodeGranted: the node did what was asked (set the lock, extended it,
	// deleted it, committed the token).
	NodeGranted
	// NodeRefused: the node answered no. For a lock, another owner holds the
	// key; for Extend and Unlock, the key no longer holds this owner's value.
	NodeRefused
	// NodeFailed: the call returned an error other than a timeout, or the
	// node could not be reached (its last dial failed, say with "connection
	// refused"). Err says why.
	NodeFailed
	// NodeTimedOut: the node did not answer within the node timeout, or
	// before the caller's ctx ended (its Err then wraps ctx's error).
	NodeTimedOut
	// NodeAmnesiac: the node has lost its fencing state (its node-id marker
	// is gone) and is left out of quorums until it is repaired.
	NodeAmnesiac

	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{"no reply", "granted", "refused", "failed", "timed out", "amnesiac"}

func (o Outcome) String() string {
	if o < NumOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// NodeResult is one node's part in an operation.
type NodeResult struct {
	Node    int // index into the nodes given to New
	Outcome Outcome
	Err     error         // set for NodeFailed (the node's own error) and NodeTimedOut
	Latency time.Duration // time to the reply; zero for NodeNoReply
}

// Majority is the smallest number of nodes any two of which intersect.
func Majority(n int) int { return n/2 + 1 }
