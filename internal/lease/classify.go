package lease

import (
	"errors"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
)

// Why an attempt was lost: contention or an outage, and whether the
// caller's ctx or the nodes ended it (the kinds no retry fixes are
// internal/verdict's).

// classifyAcquire tells contention from unavailability once an attempt is lost.
func classifyAcquire(t *round.Tally) error {
	blank, permits := 0, 0
	for _, r := range t.Results {
		if errors.Is(r.Err, kind.ErrWrongType) {
			return kind.ErrWrongType
		}
		if r.Err == errNoIdentity {
			blank++
		}
		if errors.Is(r.Err, kind.ErrPermits) {
			permits++
		}
	}
	if blank >= t.Majority {
		// Never provisioned, or a majority lost its data: no retry helps.
		return kind.ErrNotProvisioned
	}
	if t.N-permits < t.Majority {
		// A semaphore's size differs from this client's on too many nodes
		// for the others to grant: every retry would fail so. (Fewer may
		// lag behind a SetPermits; the others still decide.)
		return kind.ErrPermits
	}
	if k := verdict.BlockingKind(t); k != nil {
		return k
	}
	// A node that stores another size for a semaphore refuses as a held
	// lock does: a minority of them (a SetPermits that missed a node) is
	// contention, and the other slots are worth trying.
	if couldBeContention(t, 0) {
		return kind.ErrLocked
	}
	return kind.ErrUnavailable
}

// couldBeContention: the nodes that granted or refused (a held lock, or
// another size for a semaphore), with silent more that would answer so,
// make a majority: the attempt was lost to refusals, not for want of
// answers.
func couldBeContention(t *round.Tally, silent int) bool {
	permits := 0
	for _, r := range t.Results {
		if errors.Is(r.Err, kind.ErrPermits) {
			permits++
		}
	}
	return t.Granted()+t.Counts[round.NodeRefused]+permits+silent >= t.Majority
}

// classifyEnded says why an attempt that ctx cut short was not won, from
// what the nodes said before it ended (docs/design.md, "An acquisition
// that ctx cut short"): a kind no retry fixes; ErrUnavailable if the nodes
// that failed on their own leave too few for a majority; if only the nodes
// ctx cut short after a node timeout of silence leave too few,
// ErrUnavailable without a refusal and nil beside one; else ErrLocked if a
// node refused; else nil: ctx alone ended it, and the Cause says so. (It
// used to say ErrUnavailable for every attempt cancelled before a majority
// answered: code paging on ErrUnavailable fired on shutdowns.)
func classifyEnded(t *round.Tally, ctxErr error, nodeTimeout time.Duration) error {
	k := classifyAcquire(t)
	if k != kind.ErrUnavailable {
		return k
	}
	failed, cut := failedBefore(t, ctxErr, nodeTimeout)
	if t.N-failed < t.Majority {
		return kind.ErrUnavailable
	}
	refused := t.Counts[round.NodeRefused] > 0
	if t.N-failed-cut < t.Majority {
		// The silent nodes are paused, or healthy and slower than the node
		// timeout (a round in which most nodes are late gives them its
		// patience). Beside a refusal that is a stale key in an outage or
		// a lock held on the slow nodes, and ctx ended before they could
		// say which. Checking the refusal first said "held elsewhere" for
		// the outage (TestAnOutageCutByCtxBeforeTheLossSaysUnavailable);
		// counting the silent nodes first said ErrUnavailable for the held
		// lock (TestAHeldLockOnSlowNodesCutByCtxIsNotAnOutage).
		if refused {
			return nil
		}
		return kind.ErrUnavailable
	}
	if refused {
		return kind.ErrLocked
	}
	return nil
}

// FailedBefore: the nodes that failed before ctx ended (its error ctxErr)
// leave too few for a majority. A node cut short by ctx failed if it had
// been silent for a node timeout by then; one cut short sooner had not.
func FailedBefore(t *round.Tally, ctxErr error, nodeTimeout time.Duration) bool {
	failed, cut := failedBefore(t, ctxErr, nodeTimeout)
	return t.N-failed-cut < t.Majority
}

// failedBefore counts the nodes that failed on their own (an error, or
// given up on by the round) and, apart, the ones ctx cut short after a
// node timeout of silence.
func failedBefore(t *round.Tally, ctxErr error, nodeTimeout time.Duration) (failed, cut int) {
	for _, r := range t.Results {
		if r.Outcome != round.NodeFailed && r.Outcome != round.NodeTimedOut {
			continue
		}
		switch {
		case !errors.Is(r.Err, ctxErr):
			failed++
		case r.Latency >= nodeTimeout:
			cut++
		}
	}
	return failed, cut
}
