package main

import (
	"context"
	"fmt"
	"time"
)

// The fault step: time to acquire (TryLock) with 0, 1 and 2 of the 5 nodes
// paused (SIGSTOP). Each row has its own fresh implementation, warmed by a
// few cycles before the pause, as a running service's client would be.

type faultKey struct {
	fenced bool
	name   string
	paused int
}

type faultRow struct {
	n, failed int
	p50, p99  time.Duration
}

// slowAttempts is how many attempts redsync at its defaults makes with
// 2 nodes paused, in the first run only (and none with 1): each waits out
// go-redis's ReadTimeout, and so does its Unlock.
const slowAttempts = 2

func (b *bench) faultStep(ctx context.Context, run int, set *nodeSet, fenced bool, specs []spec, rd *runData) {
	for _, paused := range []int{0, 1, 2} {
		for _, sp := range specs {
			attempts := b.faultAttempts
			if sp.name == nRSDefault && paused > 0 {
				if run > 0 || paused == 1 {
					continue
				}
				attempts = slowAttempts
			}
			row := b.faultRow(ctx, run, set, sp, paused, attempts)
			rd.faults[faultKey{fenced, sp.name, paused}] = row
			progress("  faults %s, %d paused: p99 %v failed %d", sp.name, paused, row.p99, row.failed)
		}
	}
}

func (b *bench) faultRow(ctx context.Context, run int, set *nodeSet, sp spec, paused, attempts int) *faultRow {
	row := &faultRow{}
	l, err := sp.make(set.addrs)
	if err != nil {
		row.failed = attempts
		return row
	}
	defer closeLockers([]locker{l})
	tag := fmt.Sprintf("fault%d:%s:%d", run, sp.name, paused)
	warm := &cellResult{}
	for i := range 3 {
		cycle(ctx, l, fmt.Sprintf("%s:warm:%d", tag, i), warm)
	}
	var stopped []int
	for i := range paused {
		n := len(set.g) - 1 - i
		if err := set.g[n].Pause(ctx); err == nil {
			stopped = append(stopped, n)
		}
	}
	defer func() {
		for _, n := range stopped {
			set.g[n].Resume(ctx)
		}
	}()
	var ds []time.Duration
	for i := range attempts {
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		t0 := time.Now()
		unlock, err := safeTry(cctx, l, fmt.Sprintf("%s:%d", tag, i))
		ds = append(ds, time.Since(t0))
		if err != nil {
			row.failed++
		} else {
			func() { defer func() { recover() }(); unlock(cctx) }()
		}
		cancel()
	}
	row.n, row.p50, row.p99 = len(ds), pct(ds, 0.5), pct(ds, 0.99)
	return row
}

func safeTry(ctx context.Context, l locker, key string) (unlock func(context.Context) error, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return l.try(ctx, key)
}
