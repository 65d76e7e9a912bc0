package lease

import (
	"errors"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Why a node failed: the errors no retry can fix, and the cause of a node
// that cannot be reached.

// Final reports a kind of failure for which Lock gives up at once.
func Final(k error) bool {
	switch k {
	case kind.ErrWrongType, kind.ErrPermits, kind.ErrNotProvisioned, kind.ErrAuth, kind.ErrNoPermission, kind.ErrScript, kind.ErrWrongNodeList, kind.ErrFencingNode:
		return true
	}
	return false
}

// permanentKinds are what PermanentKind returns, in its order.
var permanentKinds = [...]error{kind.ErrAuth, kind.ErrNoPermission, kind.ErrScript, kind.ErrFencingNode}

// transientCodes are the error codes a node replies with while it is in a
// state that passes (full, busy with a script, loading, a replica during a
// failover...). Inside a script a call's error keeps its code, at the start
// (Redis 7) or after a '-' (Redis 6 wraps it in "ERR Error running script").
var transientCodes = [...]string{"OOM", "BUSY", "LOADING", "READONLY", "MISCONF", "TRYAGAIN",
	"MASTERDOWN", "NOREPLICAS", "CLUSTERDOWN", "MAXCLIENTS"}

// PermanentKind returns ErrAuth, ErrNoPermission, ErrScript or
// ErrFencingNode for a node's error reply that the same call would get
// again however often it is retried, and nil for any other error.
//
// A node that wants a password and got none answers NOAUTH, except to a
// command of more than 10 arguments (every lock script), before which
// Redis 7.0 and Valkey 8.0 answer "ERR Protocol error: unauthenticated
// multibulk length" and close the connection (or "unauthenticated bulk
// length", to an argument over 16 KiB): ErrAuth too.
//
// CROSSSLOT comes from a cluster-mode node given as a plain client: the
// fenced scripts' keys span slots (the lock's and the node's own fencing
// keys), and the node refuses them by their key names alone, so every
// retry gets it again. It is the misconfiguration New refuses for a
// ClusterClient with fencing: ErrFencingNode.
func PermanentKind(err error) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return nil
	}
	msg := re.Error()
	for _, code := range transientCodes {
		if strings.HasPrefix(msg, code+" ") || strings.Contains(msg, "-"+code+" ") {
			return nil
		}
	}
	switch {
	case strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "WRONGPASS") ||
		strings.HasPrefix(msg, "ERR AUTH") || strings.HasPrefix(msg, "ERR invalid password") ||
		strings.HasPrefix(msg, "ERR Protocol error: unauthenticated"):
		return kind.ErrAuth
	case strings.HasPrefix(msg, "CROSSSLOT"):
		return kind.ErrFencingNode
	case strings.Contains(msg, "NOPERM") || strings.Contains(msg, "The user executing the script can't") ||
		strings.Contains(msg, "ACL failure in script"): // Valkey 8's words for a command the ACL denies a script
		return kind.ErrNoPermission
	case strings.HasPrefix(msg, "ERR ") && (strings.Contains(msg, "user_script") ||
		strings.Contains(msg, "Error running script") || strings.Contains(msg, "Error compiling script") ||
		strings.Contains(msg, "from script")):
		return kind.ErrScript
	}
	return nil
}

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
	if k := BlockingKind(t); k != nil {
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

// BlockingKind returns the kind of the failures no retry can fix, when the
// nodes that failed so leave too few others to form a majority: the
// attempt failed because of them, and every retry would. With several
// kinds it is the one most of those nodes gave. It returns nil otherwise,
// even if some nodes failed so: the others may still grant, and the
// failures are in the error and the log.
func BlockingKind(t *round.Tally) error {
	var counts [len(permanentKinds)]int
	blocked := 0
	for _, r := range t.Results {
		if r.Outcome != round.NodeFailed {
			continue
		}
		if k := PermanentKind(r.Err); k != nil {
			blocked++
			for i, pk := range permanentKinds {
				if pk == k {
					counts[i]++
				}
			}
		}
	}
	if t.N-blocked >= t.Majority {
		return nil
	}
	best := 0
	for i := range counts {
		if counts[i] > counts[best] {
			best = i
		}
	}
	return permanentKinds[best]
}
