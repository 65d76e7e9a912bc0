package waiting

import (
	"context"
	"math/rand/v2"
	"time"
)

// The pauses of the waiting loops: the jittered retry delay, its doubling
// through an outage, and the short delays around a handoff.

// Delays are a client's: its retry delay's bounds, its outage bound
// (WithMaxOutage; 0: none) and its node timeout.
type Delays struct {
	RetryMin, RetryMax, MaxOutage, NodeTimeout time.Duration
}

// handoffSpread bounds the age-priority delay of a woken waiter.
const handoffSpread = 2 * time.Millisecond

// wakeDelay is how long a waiter that has waited for age lets others go
// first after a notification: handoffSpread for a newcomer, near zero for a
// waiter that has waited long.
func wakeDelay(age time.Duration) time.Duration {
	return time.Duration(float64(handoffSpread) / (1 + float64(age)/float64(10*time.Millisecond)))
}

// outage counts the attempts in a row of a waiting call that failed for
// another reason than contention, and when the first of them began.
type outage struct {
	n     int
	since time.Time
}

// next is the pause before the next attempt of a waiting call whose
// attempt begun at attemptStart failed (contended: to another owner): the
// jittered retry delay, doubled for each attempt in a row lost to an
// outage rather than to a holder, so that waiters do not keep a saturated
// node or machine saturated. lasted is not 0 if the outage has lasted the
// client's bound (WithMaxOutage): how long it has.
func (d Delays) next(o *outage, contended bool, attemptStart, now time.Time) (delay, lasted time.Duration) {
	delay = d.retryDelay()
	if contended {
		*o = outage{}
		return delay, 0
	}
	o.n++
	delay = outageDelay(delay, o.n)
	if o.n == 1 {
		o.since = attemptStart
	}
	if bound := d.MaxOutage; bound > 0 {
		lasted := now.Sub(o.since)
		if lasted >= bound {
			return 0, max(lasted, 1)
		}
		delay = min(delay, bound-lasted) // the last try is on time
	}
	return delay, 0
}

// outageDelay doubles a retry delay for each attempt in a row that failed
// for another reason than contention, up to maxOutageDelay.
func outageDelay(delay time.Duration, outages int) time.Duration {
	return min(delay<<min(outages-1, 8), max(delay, maxOutageDelay))
}

const maxOutageDelay = time.Second

func (d Delays) retryDelay() time.Duration {
	lo, hi := d.RetryMin, d.RetryMax
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}

// sleepCtx waits d, and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
