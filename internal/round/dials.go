package round

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"github.com/redis/go-redis/v9"
)

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
		case !IsTimeout(err) && !errors.Is(err, context.Canceled):
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

// Unreachable returns why node i cannot be reached: the error of its last
// dial, if that failed (not by a timeout) and the node has not answered
// since. A call to it that timed out, or was given up on, was waiting on
// such dials, so this is its cause rather than slowness.
func (e *Engine) Unreachable(i int) error {
	rec := e.dials[i]
	if rec == nil {
		return nil
	}
	f := rec.last.Load()
	if f == nil || int64(f.at.Sub(e.epoch)) < e.health[i].answered.Load() {
		return nil
	}
	return f.err
}

// IsTimeout tells a node that did not answer in time from one that failed.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// IsServerReply reports whether err is an error reply from Redis itself
// (WRONGTYPE, a script error): retrying the same call cannot help.
func IsServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
