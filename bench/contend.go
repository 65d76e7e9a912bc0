package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
)

// The contention step: 8 goroutines, one key, each with its own client (as
// separate processes would be), Lock then Unlock at once, for a fixed time.

type contKey struct {
	fenced bool
	name   string
}

type contRow struct {
	acquisitions int
	handoffs     int
	seconds      float64
	medianWait   time.Duration
	// worstWait includes the waits that ended after the clock stopped.
	worstWait time.Duration
	minShare  float64
	failed    int
	// attemptsPerAcq is this library's acquisition attempts (from its
	// observer) per acquisition; 0 for the others.
	attemptsPerAcq float64
}

const contendWorkers = 8

// contendWarmUp is how long the workers contend before the clock starts,
// so that they have dialled (and this library subscribed).
const contendWarmUp = 300 * time.Millisecond

// attempts counts our clients' acquisition attempts in a contention run.
var attempts atomic.Int64

var countAttempts = redlock.WithObserver(redlock.ObserverFunc(func(_ context.Context, ev redlock.Event) {
	if ev.Op == "lock" {
		attempts.Add(1)
	}
}))

func (b *bench) contentionStep(ctx context.Context, run int, set *nodeSet, fenced bool, specs []spec, rd *runData) {
	for _, sp := range specs {
		row := b.contend(ctx, run, set, sp)
		rd.contention[contKey{fenced, sp.name}] = row
		progress("  contention %s: %d acquisitions, worst wait %v", sp.name, row.acquisitions, row.worstWait)
	}
}

func (b *bench) contend(ctx context.Context, run int, set *nodeSet, sp spec) *contRow {
	type acq struct {
		w  int
		at time.Time
	}
	var mu sync.Mutex
	var acqs []acq
	var waits []time.Duration
	var late time.Duration
	row := &contRow{seconds: b.contendFor.Seconds()}
	key := fmt.Sprintf("contend%d:%s", run, sp.name)
	lockers := make([]locker, contendWorkers)
	for w := range lockers {
		l, err := sp.make(set.addrs)
		if err != nil {
			row.failed++
			continue
		}
		lockers[w] = l
	}
	defer closeLockers(lockers)
	// A goroutine starts no Lock after until, but the one it is in runs
	// to its end (within opTimeout): cancelling it at the deadline would
	// leave some implementations' partial acquisitions on the nodes until
	// their TTL, and starve the next phase.
	phase := func(until time.Time, measured bool) {
		var wg sync.WaitGroup
		for w, l := range lockers {
			if l == nil {
				continue
			}
			wg.Go(func() {
				for time.Now().Before(until) {
					cctx, cancel := context.WithTimeout(ctx, opTimeout)
					t0 := time.Now()
					unlock, err := safeLock(cctx, l, key)
					at := time.Now()
					wait := at.Sub(t0)
					mu.Lock()
					switch {
					case !measured:
					case err != nil:
						row.failed++
					case at.Before(until):
						acqs = append(acqs, acq{w, at})
						waits = append(waits, wait)
					default:
						late = max(late, wait) // acquired after the clock stopped
					}
					mu.Unlock()
					if err == nil {
						func() { defer func() { recover() }(); unlock(cctx) }()
					}
					cancel()
				}
			})
		}
		wg.Wait()
	}
	phase(time.Now().Add(contendWarmUp), false)
	attempts.Store(0)
	phase(time.Now().Add(b.contendFor), true)
	tries := attempts.Load()

	slices.SortFunc(acqs, func(a, b acq) int { return a.at.Compare(b.at) })
	row.acquisitions = len(acqs)
	perGoroutine := make([]int, contendWorkers)
	for i, a := range acqs {
		perGoroutine[a.w]++
		if i > 0 && acqs[i-1].w != a.w {
			row.handoffs++
		}
	}
	row.medianWait, row.worstWait = pct(waits, 0.5), max(pct(waits, 1), late)
	if len(acqs) > 0 {
		row.attemptsPerAcq = float64(tries) / float64(len(acqs))
		row.minShare = float64(slices.Min(perGoroutine)) / (float64(len(acqs)) / contendWorkers)
	}
	return row
}

func safeLock(ctx context.Context, l locker, key string) (unlock func(context.Context) error, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return l.lock(ctx, key)
}
