package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock"
)

// tickName is the lock name for the tick of length d that contains now:
// name:20060102T150405Z, the tick's start in UTC. d must divide a day, so
// that ticks start where cron's minutes and hours do.
func tickName(name string, d time.Duration, now time.Time) (string, error) {
	if d < time.Second || d%time.Second != 0 || (24*time.Hour)%d != 0 {
		return "", fmt.Errorf("--name-per-tick %v: want whole seconds that divide 24h (1m, 5m, 1h, 24h)", d)
	}
	// Truncate counts from the zero time, a UTC midnight, so a d that
	// divides a day gives ticks aligned to midnight UTC.
	return name + ":" + now.UTC().Truncate(d).Format("20060102T150405Z"), nil
}

// Bounds on tryLockContended's retries of split votes.
const (
	contendAttempts = 100
	contendMinDelay = 5 * time.Millisecond
	contendMaxDelay = 50 * time.Millisecond
)

// tryLockContended is TryLock that retries a split vote: when hosts try one
// name at the same moment, each can win some nodes and none a majority, and
// then all of them fail with ErrLocked and nobody runs the tick. An attempt
// that was granted by at least one node saw no holder on that node, so it
// retries after a short random delay, for at most window and
// contendAttempts attempts. An attempt that no node granted means the name
// is held: it returns ErrLocked at once.
//
// It must be used only on a name that is never released (a tick's name):
// then a retry can succeed only if nobody took the name, and no host runs
// a second time.
func tryLockContended(ctx context.Context, c *redlock.Client, name string, window time.Duration) (*redlock.Lock, error) {
	deadline := time.Now().Add(window)
	for attempt := 1; ; attempt++ {
		l, err := c.TryLock(ctx, name)
		if err == nil || !splitVote(err) || attempt >= contendAttempts || time.Now().After(deadline) {
			return l, err
		}
		delay := contendMinDelay + rand.N(contendMaxDelay-contendMinDelay)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
	}
}

// splitVote reports whether err is ErrLocked from an attempt that some node
// granted.
func splitVote(err error) bool {
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrLocked) || !errors.As(err, &qe) {
		return false
	}
	for _, n := range qe.Nodes {
		if n.Outcome == redlock.NodeGranted {
			return true
		}
	}
	return false
}
