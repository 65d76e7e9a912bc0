package lease

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// Round 2, the commit of the token (docs/fencing.md, step 2). The proof
// needs it on a majority, no more, so a mutex asks a majority first: the
// nodes that granted round 1 soonest. Only if one of those does not commit
// within the node timeout (it failed, lost its state, or is silent) does
// the commit go to every node that has not committed it yet, the silent
// ones again (a second commit of one token changes nothing). On five nodes
// that saves two commit scripts in five. The family's shapes still ask
// every node at once: docs/lock-family.md argues each of them so, and this
// was measured on the mutex.

// commit is round 2: raise H to token on a majority. won is round 1's
// tally, until the end of the attempt's validity. It returns the kind of
// failure (nil on success) and the per-node results.
func (l *Lease) commit(ctx context.Context, token int64, won *round.Tally, until time.Time) (nodes []round.NodeResult, why, cause error) {
	c := &commitRound{l: l, call: l.shape.Commit(l, token), token: token}
	var first []bool
	if _, ok := l.shape.(*mutex); ok {
		first = commitFirst(won)
	}
	return l.CommitRound(ctx, token, c.op, c, first, until)
}

// commitFirst is the nodes a mutex's round 2 asks first: the majority of
// the nodes that granted round 1 (won) that answered it soonest; nil (every
// node) where the majority is every node.
func commitFirst(won *round.Tally) []bool {
	if won.Majority == won.N {
		return nil
	}
	first := make([]bool, won.N)
	for range won.Majority {
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

// aborted: a node holds a newer token than the one committed.
func aborted(t *round.Tally) bool { return t.Counts[round.NodeRefused] > 0 }

// CommitRound sends round 2 (op) and tells its outcome: any node that
// refuses aborts the acquisition (a newer token was committed). It asks
// the nodes of first (nil: every node) and, if they do not all commit
// within the node timeout, every node that has not committed (widen),
// unless the attempt's validity ended (until; zero for no bound).
func (l *Lease) CommitRound(ctx context.Context, token int64, op round.NodeOp, split round.Split, first []bool,
	until time.Time) (nodes []round.NodeResult, why, cause error) {
	e := l.e
	if e.Hooks.RoundTwo != nil {
		e.Hooks.RoundTwo(l.name, uint64(token))
	}
	spec := round.Spec{Name: "commit", Op: op, Split: split}
	done := func(t *round.Tally) bool { return t.Decided() || aborted(t) }
	if first != nil {
		// The nodes asked are a bare majority: once one has answered, a
		// silent one is given up on at about the node timeout (or the
		// slowest reply, if longer), not after the round's patience.
		// Until one has answered, all of them late is a saturated
		// client, and the round is patient as before: widening then
		// would send the commit again, and more work is what a saturated
		// client cannot take. The round waits for every node asked
		// (one that failed does not end it), so that only the nodes that
		// did not commit are asked again.
		spec.Sent, spec.Quorum = first, 1
		done = func(t *round.Tally) bool { return t.Won() || aborted(t) }
	}
	t, ctxErr := e.Rounds.Run(ctx, spec, done, nil)
	if t == nil {
		return nil, nil, ctxErr
	}
	late := false
	if first != nil {
		late, ctxErr = l.widen(ctx, t, ctxErr, spec, first, until)
	}
	switch {
	case ctxErr != nil:
		return t.Snapshot(), nil, ctxErr
	case late:
		return t.Snapshot(), kind.ErrNoValidity, nil
	case aborted(t):
		return t.Snapshot(), kind.ErrSuperseded, nil
	case !t.Won():
		// As round 1 says it (classifyAcquire): a key of another type
		// under H is no outage, and no retry fixes it.
		if slices.ContainsFunc(t.Results, func(r round.NodeResult) bool { return errors.Is(r.Err, kind.ErrWrongType) }) {
			return t.Snapshot(), kind.ErrWrongType, nil
		}
		if k := verdict.BlockingKind(t); k != nil {
			return t.Snapshot(), k, nil
		}
		return t.Snapshot(), kind.ErrUnavailable, nil
	}
	return t.Snapshot(), nil, nil
}

// widen completes a round 2 sent only to the nodes of first (spec; tally t,
// ctx's error ctxErr): unless it is won, aborted or cut short by ctx, it
// sends the commit to every node that neither committed nor refused to
// (those not asked, and those asked that gave no answer, again), and
// counts their answers in t. Its patience is the old round's: it ends once
// the answers of both sends, from distinct nodes, make a majority. The
// nodes never asked are NodeNoReply: the round was decided without them
// (NotAsked, before the second send's answers, which then count). Past the
// attempt's validity (until, on the lease's clock) it sends nothing and
// reports late: a commit won then would be refused anyway.
func (l *Lease) widen(ctx context.Context, t *round.Tally, ctxErr error, spec round.Spec, first []bool,
	until time.Time) (late bool, err error) {
	t.NotAsked(first)
	if ctxErr != nil || t.Won() || aborted(t) {
		return false, ctxErr
	}
	if !until.IsZero() && !l.e.Clock.Now().Before(until) {
		return true, nil
	}
	// A node that answered without committing (failed, amnesiac) is not
	// asked again: the old round would not have asked it twice either,
	// and its second answer would count twice towards the patience.
	rest := make([]bool, len(first))
	left := 0
	for i, r := range t.Results {
		rest[i] = r.Outcome == round.NodeNoReply || r.Outcome == round.NodeTimedOut
		if rest[i] {
			left++
		}
	}
	if t.Granted()+left < t.Majority {
		return false, nil // too many answered without committing
	}
	spec.Sent, spec.Quorum = rest, t.Majority-t.Answered
	if spec.Quorum <= 0 {
		spec.Quorum = round.NoPatience
	}
	base := t.Granted()
	w, err := l.e.Rounds.Run(ctx, spec, func(w *round.Tally) bool {
		g := base + w.Granted()
		return g >= w.Majority || g+w.N-w.Replied < w.Majority || aborted(w)
	}, nil)
	if w == nil {
		return false, err // the client was closed meanwhile
	}
	t.Widen(w, rest)
	if t.Won() {
		// Won with both sends' answers: ctx may have cut a node the
		// second send no longer needed (Run cannot tell, seeing only
		// its own).
		return false, nil
	}
	return false, err
}
