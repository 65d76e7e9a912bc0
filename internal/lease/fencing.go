package lease

import (
	"context"
	"fmt"
	"strings"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Fencing tokens, minted by the quorum (docs/fencing.md).
//
// Every fenced acquisition returns a token that only grows: round 1 rides on
// the acquisition itself (each node proposes a candidate c*256 + id from its
// counter G, above the highest token it holds for the name), round 2
// commits the largest candidate on a majority, raising the name's H and
// every committing node's G, and aborts if a node reports a higher token.
// The validity is computed after round 2.
//
// Per lock name a node keeps only H, which expires a retention R after its
// last commit: G, one counter per node, carries the order across names and
// across H's expiry. Tokens are below 2^53, so they are exact in JSON
// numbers and Lua doubles.

// errForeignNode is the Err of a node that holds another roster than the
// one the client checked: another server is behind its address now.
var errForeignNode = fmt.Errorf("%w: the node holds another deployment's roster (another server behind its address?)", kind.ErrWrongNodeList)

// errNoIdentity is the Err of a node that holds no fencing identity at all:
// never provisioned, or emptied.
var errNoIdentity = fmt.Errorf("%w: the node holds no fencing identity", kind.ErrAmnesia)

// fencedAcquireOp is round 1 on one node.
func (l *Lease) fencedAcquireOp(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
	if err := l.afterOwn(ctx, i); err != nil {
		return round.NodeFailed, 0, err
	}
	l.sending(i)
	return l.parseFencedAcquire(i, l.acquire.Run(ctx, node))
}

// parseFencedAcquire is node i's outcome of round 1, fenced: the node's
// candidate, or why it does not count.
func (l *Lease) parseFencedAcquire(i int, cmd *redis.Cmd) (round.Outcome, int64, error) {
	e := l.e
	vals, err := cmd.Int64Slice()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return round.NodeFailed, 0, kind.WrongType(err)
	case kind.IsPermits(err):
		return round.NodeFailed, 0, kind.Permits(err)
	case err != nil:
		return round.NodeFailed, 0, err
	case len(vals) != 2:
		return round.NodeFailed, 0, fmt.Errorf("redlock: unexpected reply %v", vals)
	case vals[0] == -2:
		e.Deployment.Amnesiac(i)
		return round.NodeAmnesiac, 0, errNoIdentity
	case vals[0] == -1:
		e.Deployment.Amnesiac(i)
		return round.NodeAmnesiac, 0, kind.ErrAmnesia
	case vals[0] == -3:
		return round.NodeFailed, 0, l.foreign()
	case vals[1] != 0 && !l.admit(i, int(vals[1]&255)):
		// Not the node the check saw behind this address (another id), or
		// a member another address already counted for.
		e.Deployment.Recheck()
		return round.NodeFailed, 0, errNotChecked
	case vals[0] == 1:
		e.Deployment.Intact(i)
		return round.NodeGranted, vals[1], nil
	case vals[0] == refusedPromised:
		l.promisedElsewhere.Add(1)
		fallthrough
	default:
		e.Deployment.Intact(i)
		return round.NodeRefused, vals[1], nil
	}
}

// foreign is the Err of a node that refused l's roster, and starts a new
// check of the node list. A client whose check found no roster (it ran
// before the deployment was provisioned) just has not learnt it yet.
func (l *Lease) foreign() error {
	l.e.Deployment.Recheck()
	if l.list.Roster == "" {
		return errNotChecked
	}
	return errForeignNode
}

// CommitOn runs round 2's call on node i: round.NodeGranted and the node's H
// (which the caller compares with the token), or why the node does not
// count.
func (l *Lease) CommitOn(ctx context.Context, call *nodescript.Call, i int, node redis.UniversalClient) (int64, round.Outcome, error) {
	return l.parseCommit(i, call.Run(ctx, node))
}

// parseCommit is CommitOn's outcome of cmd.
func (l *Lease) parseCommit(i int, cmd *redis.Cmd) (int64, round.Outcome, error) {
	vals, err := cmd.Int64Slice()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return 0, round.NodeFailed, kind.WrongType(err)
	case err != nil:
		return 0, round.NodeFailed, err
	case len(vals) != 2:
		return 0, round.NodeFailed, fmt.Errorf("redlock: unexpected reply %v", vals)
	case vals[0] == -1:
		l.e.Deployment.Amnesiac(i)
		return 0, round.NodeAmnesiac, kind.ErrAmnesia
	case vals[0] == -3:
		return 0, round.NodeFailed, l.foreign()
	case !l.admit(i, int(vals[1])):
		l.e.Deployment.Recheck()
		return 0, round.NodeFailed, errNotChecked
	}
	return vals[0], round.NodeGranted, nil
}
