package redlock

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/redis/go-redis/v9"
)

// Why a node failed: the errors no retry can fix, and the cause of a node
// that cannot be reached.

// final reports a kind of failure for which Lock gives up at once.
func final(kind error) bool {
	switch kind {
	case ErrWrongType, ErrNotProvisioned, ErrAuth, ErrNoPermission, ErrScript, ErrWrongNodeList, ErrFencingNode:
		return true
	}
	return false
}

// permanentKinds are what permanentKind returns, in its order.
var permanentKinds = [...]error{ErrAuth, ErrNoPermission, ErrScript, ErrFencingNode}

// transientCodes are the error codes a node replies with while it is in a
// state that passes (full, busy with a script, loading, a replica during a
// failover...). Inside a script a call's error keeps its code, at the start
// (Redis 7) or after a '-' (Redis 6 wraps it in "ERR Error running script").
var transientCodes = [...]string{"OOM", "BUSY", "LOADING", "READONLY", "MISCONF", "TRYAGAIN",
	"MASTERDOWN", "NOREPLICAS", "CLUSTERDOWN", "MAXCLIENTS"}

// permanentKind returns ErrAuth, ErrNoPermission, ErrScript or
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
func permanentKind(err error) error {
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
		return ErrAuth
	case strings.HasPrefix(msg, "CROSSSLOT"):
		return ErrFencingNode
	case strings.Contains(msg, "NOPERM") || strings.Contains(msg, "The user executing the script can't") ||
		strings.Contains(msg, "ACL failure in script"): // Valkey 8's words for a command the ACL denies a script
		return ErrNoPermission
	case strings.HasPrefix(msg, "ERR ") && (strings.Contains(msg, "user_script") ||
		strings.Contains(msg, "Error running script") || strings.Contains(msg, "Error compiling script") ||
		strings.Contains(msg, "from script")):
		return ErrScript
	}
	return nil
}

// classifyAcquire tells contention from unavailability once an attempt is lost.
func classifyAcquire(t *tally) error {
	blank := 0
	for _, r := range t.results {
		if errors.Is(r.Err, ErrWrongType) {
			return ErrWrongType
		}
		if r.Err == errNoIdentity {
			blank++
		}
	}
	if blank >= t.majority {
		// Never provisioned, or a majority lost its data: no retry helps.
		return ErrNotProvisioned
	}
	if kind := blockingKind(t); kind != nil {
		return kind
	}
	if t.granted()+t.counts[NodeRefused] >= t.majority {
		return ErrLocked
	}
	return ErrUnavailable
}

// blockingKind returns the kind of the failures no retry can fix, when the
// nodes that failed so leave too few others to form a majority: the
// attempt failed because of them, and every retry would. With several
// kinds it is the one most of those nodes gave. It returns nil otherwise,
// even if some nodes failed so: the others may still grant, and the
// failures are in the error and the log.
func blockingKind(t *tally) error {
	var counts [len(permanentKinds)]int
	blocked := 0
	for _, r := range t.results {
		if r.Outcome != NodeFailed {
			continue
		}
		if k := permanentKind(r.Err); k != nil {
			blocked++
			for i, pk := range permanentKinds {
				if pk == k {
					counts[i]++
				}
			}
		}
	}
	if t.n-blocked >= t.majority {
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

// dialWatch is a go-redis hook that remembers why a client's last dial
// failed. go-redis retries a refused dial until the call's context ends and
// then returns only the context's error (logging the dial error to stderr),
// so without it a node that refuses connections, or whose name does not
// resolve, looks like one that is merely slow. The hook does nothing else,
// and costs nothing on calls.
//
// A go-redis client gets one hook, however many lock clients are made over
// it (hooks cannot be removed, and one per New would pile up), and the hook
// holds nothing of a lock client: lock clients look the record up.
type dialWatch struct{ rec *dialRecord }

// dialRecord is the last failed dial of one go-redis client.
type dialRecord struct{ last atomic.Pointer[dialFailure] }

// dialFailure is a failed dial, and when it failed.
type dialFailure struct {
	err error
	at  time.Time
}

func (w dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		switch {
		case err == nil:
			if w.rec.last.Load() != nil {
				w.rec.last.Store(nil)
			}
		case !isTimeout(err) && !errors.Is(err, context.Canceled):
			// A dial cut short says nothing about the node.
			w.rec.last.Store(&dialFailure{err: err, at: time.Now()})
		}
		return conn, err
	}
}

func (dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// watched is the dial record of every go-redis client that has the hook,
// by address. Each entry holds a weak pointer to its client, so a client
// that was dropped is not kept alive, and a new client at a reused address
// is not taken for it.
var (
	watchMu sync.Mutex
	watched = map[uintptr]watchEntry{}
)

type watchEntry struct {
	alive func() bool // the client the entry was made for still exists
	rec   *dialRecord
}

// watchDials returns node's dial record, adding the hook on first sight.
// Only go-redis's own client types are watched; for others, and for a
// client that cannot take a hook, it returns nil.
func watchDials(node redis.UniversalClient) *dialRecord {
	var addr uintptr
	var alive func() bool
	switch n := node.(type) {
	case *redis.Client:
		addr, alive = weakEntry(n)
	case *redis.ClusterClient:
		addr, alive = weakEntry(n)
	case *redis.Ring:
		addr, alive = weakEntry(n)
	default:
		return nil
	}
	watchMu.Lock()
	defer watchMu.Unlock()
	if e, ok := watched[addr]; ok && e.alive() {
		return e.rec
	}
	for a, e := range watched {
		if !e.alive() {
			delete(watched, a)
		}
	}
	rec := &dialRecord{}
	if !addHook(node, dialWatch{rec: rec}) {
		return nil
	}
	watched[addr] = watchEntry{alive: alive, rec: rec}
	return rec
}

// addHook adds h to node, reporting false if the client panicked: a
// go-redis client that was never set up (a zero redis.Client{}).
func addHook(node redis.UniversalClient, h redis.Hook) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	node.AddHook(h)
	return true
}

func weakEntry[T any](p *T) (uintptr, func() bool) {
	w := weak.Make(p)
	return uintptr(unsafe.Pointer(p)), func() bool { return w.Value() == p }
}

// unreachable returns why node i cannot be reached: the error of its last
// dial, if that failed (not by a timeout) and the node has not answered
// since. A call to it that timed out, or was given up on, was waiting on
// such dials, so this is its cause rather than slowness.
func (c *Client) unreachable(i int) error {
	rec := c.dials[i]
	if rec == nil {
		return nil
	}
	f := rec.last.Load()
	if f == nil || int64(f.at.Sub(c.epoch)) < c.health[i].answered.Load() {
		return nil
	}
	return f.err
}

// isTimeout tells a node that did not answer in time from one that failed.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isServerReply reports whether err is an error reply from Redis itself
// (WRONGTYPE, a script error): retrying the same call cannot help.
func isServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
