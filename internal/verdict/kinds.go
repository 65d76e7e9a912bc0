package verdict

import (
	"errors"
	"strings"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Why a node failed: the errors no retry can fix.

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
