package waiting

import (
	"sync"
	"time"
)

// warnEvery is the shortest time between two warnings about one name's
// failing attempts. Lock retries every retry delay (10-100 ms by default),
// and a warning per attempt would bury the log while the nodes are down.
const warnEvery = 5 * time.Second

// maxWarnedNames bounds what the limiter remembers: with more names
// warned about within warnEvery, further warnings are dropped until
// entries age out, so an outage over many names costs bounded memory and
// log volume.
const maxWarnedNames = 1024

// limiter remembers when each name was last warned about.
type limiter struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// allow reports whether a warning about name may be logged now, and if so
// records it.
func (w *limiter) allow(name string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.last[name]; ok && now.Sub(t) < warnEvery {
		return false
	}
	if w.last == nil {
		w.last = make(map[string]time.Time)
	}
	if len(w.last) >= maxWarnedNames {
		for n, t := range w.last {
			if now.Sub(t) >= warnEvery {
				delete(w.last, n)
			}
		}
		if len(w.last) >= maxWarnedNames {
			return false
		}
	}
	w.last[name] = now
	return true
}

// warnRetrying logs, rate-limited per name, an attempt that failed for
// another reason than contention and is about to be retried: nodes down,
// full, refusing the client, or too slow. The error's message names each
// failed node's cause.
func (lp *Loop) warnRetrying(f Failed, attempts int, started time.Time) {
	if lp.Log == nil || f.Contended() {
		return
	}
	if !lp.warns.allow(f.Name(), time.Now()) {
		return
	}
	lp.Log.Warn("redlock: lock attempts failing; retrying", "lock", f.Name(), "attempts", attempts,
		"waited", time.Since(started).Round(time.Millisecond), "err", f.Err())
}
