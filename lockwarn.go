package redlock

import (
	"errors"
	"sync"
	"time"
)

// lockWarnEvery is the shortest time between two warnings about one lock
// name's failing attempts. Lock retries every retry delay (10-100 ms by
// default), and a warning per attempt would bury the log while the nodes
// are down.
const lockWarnEvery = 5 * time.Second

// maxWarnedNames bounds what the limiter remembers: with more names
// warned about within lockWarnEvery, further warnings are dropped until
// entries age out, so an outage over many names costs bounded memory and
// log volume.
const maxWarnedNames = 1024

// warnLimiter remembers when each lock name was last warned about.
type warnLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// allow reports whether a warning about name may be logged now, and if so
// records it.
func (w *warnLimiter) allow(name string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.last[name]; ok && now.Sub(t) < lockWarnEvery {
		return false
	}
	if w.last == nil {
		w.last = make(map[string]time.Time)
	}
	if len(w.last) >= maxWarnedNames {
		for n, t := range w.last {
			if now.Sub(t) >= lockWarnEvery {
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

// warnRetrying logs, rate-limited per lock name, an attempt of Lock that
// failed for another reason than contention and is about to be retried:
// nodes down, full, refusing the client, or too slow. The error's message
// names each failed node's cause.
func (c *Client) warnRetrying(qe *QuorumError, attempts int, started time.Time) {
	if c.cfg.logger == nil || errors.Is(qe, ErrLocked) || errors.Is(qe, ErrSuperseded) {
		return
	}
	if !c.lockWarns.allow(qe.Name, time.Now()) {
		return
	}
	c.log.Warn("redlock: lock attempts failing; retrying", "lock", qe.Name, "attempts", attempts,
		"waited", time.Since(started).Round(time.Millisecond), "err", qe)
}
