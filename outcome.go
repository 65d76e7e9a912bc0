package redlock

import "github.com/quorumlock/redlock/internal/round"

// Outcome is what one node answered to one call.
type Outcome = round.Outcome

const (
	// NodeNoReply: the operation was decided before this node answered. Its
	// call goes on in the background until the node timeout.
	NodeNoReply = round.NodeNoReply
	// NodeGranted: the node did what was asked (set the lock, extended it,
	// deleted it, committed the token).
	NodeGranted = round.NodeGranted
	// NodeRefused: the node answered no. For a lock, another owner holds the
	// key; for Extend and Unlock, the key no longer holds this owner's value.
	NodeRefused = round.NodeRefused
	// NodeFailed: the call returned an error other than a timeout, or the
	// node could not be reached (its last dial failed, say with "connection
	// refused"). Err says why.
	NodeFailed = round.NodeFailed
	// NodeTimedOut: the node did not answer within the node timeout, or
	// before the caller's ctx ended (its Err then wraps ctx's error).
	NodeTimedOut = round.NodeTimedOut
	// NodeAmnesiac: the node has lost its fencing state (its node-id marker
	// is gone) and is left out of quorums until it is repaired.
	NodeAmnesiac = round.NodeAmnesiac
)

// NodeResult is one node's part in an operation: Node, the index into the
// nodes given to New; its Outcome; Err, set for NodeFailed (the node's own
// error) and NodeTimedOut; and Latency, the time to the reply (zero for
// NodeNoReply).
type NodeResult = round.NodeResult
