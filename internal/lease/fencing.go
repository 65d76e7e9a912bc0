package lease

import (
	"context"
	"fmt"
	"strings"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
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

// commit is round 2: raise H to token on a majority. won is round 1's
// tally. It returns the kind of failure (nil on success) and the per-node
// results.
func (l *Lease) commit(ctx context.Context, token int64, won *round.Tally) (nodes []round.NodeResult, why, cause error) {
	c := &commitRound{l: l, call: l.shape.Commit(l, token), token: token}
	var first []bool
	if _, ok := l.shape.(*mutex); ok {
		first = commitFirst(won)
	}
	return l.CommitRound(ctx, token, c.op, c, first)
}

// commitFirst is the nodes a mutex's round 2 asks first: the majority of
// the nodes that granted round 1 (won) that answered it soonest. The
// proof needs the commit on a majority, no more (docs/fencing.md, step 2),
// and on five nodes the other two's commits were two in five of the
// commit scripts the nodes ran. The family's shapes still commit on every
// node: docs/lock-family.md argues each of them so, and this was measured
// on the mutex.
func commitFirst(won *round.Tally) []bool {
	first := make([]bool, won.N)
	for k := 0; k < won.Majority; k++ {
		best := -1
		for i, r := range won.Results {
			if r.Outcome == round.NodeGranted && !first[i] && (best < 0 || r.Latency < won.Results[best].Latency) {
				best = i
			}
		}
		if best < 0 {
			return nil // round 1 was not won: ask every node
		}
		first[best] = true
	}
	return first
}

// commitRound is round 2 of one attempt, whole (op) and split for a batch
// (round.Split).
type commitRound struct {
	l     *Lease
	call  *nodescript.Call
	token int64
}

func (c *commitRound) op(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
	return c.Parse(i, c.call.Run(ctx, node))
}

func (c *commitRound) Command(int) []any { return c.call.Command() }

func (c *commitRound) Parse(i int, cmd *redis.Cmd) (round.Outcome, int64, error) {
	h, o, err := c.l.parseCommit(i, cmd)
	switch {
	case o != round.NodeGranted:
		return o, 0, err
	case h > c.token:
		return round.NodeRefused, h, nil // someone committed a newer token
	default:
		return round.NodeGranted, h, nil
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

// CommitRound sends round 2 (op) and tells its outcome: any node that
// refuses aborts the acquisition (a newer token was committed). It asks
// the nodes of first (nil: every node), and the others only if those
// cannot make a majority without them.
func (l *Lease) CommitRound(ctx context.Context, token int64, op round.NodeOp, split round.Split, first []bool) (nodes []round.NodeResult, why, cause error) {
	e := l.e
	if e.Hooks.RoundTwo != nil {
		e.Hooks.RoundTwo(l.name, uint64(token))
	}
	aborted := func(t *round.Tally) bool { return t.Counts[round.NodeRefused] > 0 }
	done := func(t *round.Tally) bool { return t.Decided() || aborted(t) }
	if first != nil {
		// Not at Lost: the skipped nodes count as lost, and the answers
		// still due from the nodes asked count towards the widened round.
		done = func(t *round.Tally) bool { return t.Won() || aborted(t) }
	}
	t, ctxErr := e.Rounds.Run(ctx, round.Spec{Name: "commit", Op: op, Split: split, Sent: first,
		Quorum: quorumOf(first)}, done, nil)
	if t == nil {
		return nil, nil, ctxErr
	}
	if first != nil {
		ctxErr = l.widen(ctx, t, ctxErr, op, split, first, aborted)
	}
	switch {
	case ctxErr != nil:
		return t.Snapshot(), nil, ctxErr
	case aborted(t):
		return t.Snapshot(), kind.ErrSuperseded, nil
	case !t.Won():
		if k := verdict.BlockingKind(t); k != nil {
			return t.Snapshot(), k, nil
		}
		return t.Snapshot(), kind.ErrUnavailable, nil
	}
	return t.Snapshot(), nil, nil
}

// widen completes a round 2 sent only to the nodes of first (tally t, ctx's
// error ctxErr): if they could not make a majority and nothing aborted it,
// it asks the others and counts their answers in t. The nodes it never
// asked are NodeNoReply: the round was decided without them.
func (l *Lease) widen(ctx context.Context, t *round.Tally, ctxErr error, op round.NodeOp, split round.Split,
	first []bool, aborted func(*round.Tally) bool) error {
	if ctxErr != nil || t.Won() || aborted(t) {
		t.NotAsked(first)
		return ctxErr
	}
	rest := make([]bool, len(first))
	for i, asked := range first {
		rest[i] = !asked
	}
	base := t.Granted()
	w, err := l.e.Rounds.Run(ctx, round.Spec{Name: "commit", Op: op, Split: split, Sent: rest, Quorum: quorumOf(rest)},
		func(w *round.Tally) bool {
			g := base + w.Granted()
			return g >= w.Majority || g+w.N-w.Replied < w.Majority || aborted(w)
		}, nil)
	if w == nil {
		t.NotAsked(first)
		return err // the client was closed meanwhile
	}
	t.Widen(w, first)
	return err
}

// quorumOf is the Spec.Quorum of a round 2 sent to the nodes of asked (nil:
// every node): all of them but one. Asked, they answered round 1 a moment
// ago, so one of them silent while the others answer is a node down, not
// a saturated client, and is given up on at about the node timeout, not
// after the patience.
func quorumOf(asked []bool) int {
	if asked == nil {
		return 0
	}
	n := 0
	for _, a := range asked {
		if a {
			n++
		}
	}
	return max(n-1, 1)
}
