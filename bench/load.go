package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The load step: TryLock+Unlock on distinct names (nobody contends) by 1 to
// 256 goroutines, sharing one client or each with its own, for every
// implementation, in turns.
var loadGoroutines = []int{1, 8, 64, 256}

// cellKey names a load cell. Fenced cells run on the appendfsync-always
// nodes, unfenced ones on the appendonly-no nodes.
type cellKey struct {
	fenced    bool
	perClient bool
	g         int
}

func (k cellKey) String() string {
	mode := "shared client"
	if k.perClient {
		mode = "client each"
	}
	f := "unfenced"
	if k.fenced {
		f = "fenced"
	}
	return fmt.Sprintf("%s, %d goroutines, %s", f, k.g, mode)
}

// cellResult is one implementation in one load cell, over all its turns.
type cellResult struct {
	ok           int // lock and unlock both succeeded
	failed       int // the lock attempt failed (or the implementation could not be built)
	failedUnlock int
	wall         time.Duration
	lat          []time.Duration // of the ok cycles
	use          usage
	firstErr     string
}

func (c *cellResult) add(d *cellResult) {
	c.ok += d.ok
	c.failed += d.failed
	c.failedUnlock += d.failedUnlock
	c.wall += d.wall
	c.lat = append(c.lat, d.lat...)
	c.use = c.use.plus(d.use)
	if c.firstErr == "" {
		c.firstErr = d.firstErr
	}
}

func (c *cellResult) goodput() float64 {
	if c.wall <= 0 {
		return 0
	}
	return float64(c.ok) / c.wall.Seconds()
}

// perOp divides by the successful cycles; with none, it is 0 (reported as
// missing).
func (c *cellResult) perOp(x float64) float64 {
	if c.ok == 0 {
		return 0
	}
	return x / float64(c.ok)
}

func (c *cellResult) cpuPerOp() float64 {
	return c.perOp(float64(c.use.client+c.use.nodes) / 1e3)
}

// opTimeout bounds every operation of every step.
const opTimeout = 10 * time.Second

func (b *bench) loadStep(ctx context.Context, run int, set *nodeSet, fenced bool, specs []spec, rd *runData) {
	for _, perClient := range []bool{false, true} {
		shared := make([]locker, len(specs))
		sharedErr := make([]error, len(specs))
		if !perClient {
			for i, sp := range specs {
				shared[i], sharedErr[i] = sp.make(set.addrs)
			}
		}
		for _, g := range loadGoroutines {
			key := cellKey{fenced, perClient, g}
			cells := map[string]*cellResult{}
			for _, sp := range specs {
				cells[sp.name] = &cellResult{}
			}
			for round := range b.loadRounds {
				for i, sp := range specs {
					tag := fmt.Sprintf("ld%d:%d:%v:%v:%d:%d", run, i, fenced, perClient, g, round)
					r := &cellResult{failed: 1, firstErr: fmt.Sprint("could not be built: ", sharedErr[i])}
					if perClient || shared[i] != nil {
						r = b.loadRound(ctx, set, sp, shared[i], g, b.loadOps/b.loadRounds, b.loadFor/time.Duration(b.loadRounds), tag)
					}
					cells[sp.name].add(r)
				}
			}
			rd.load[key] = cells
			ours := cells[oursName(fenced)]
			progress("  load %v: goodput %.0f/s, majority floor %.0f/s; failed %d+%d", key, ours.goodput(),
				cells[nFloorMaj].goodput(), ours.failed, ours.failedUnlock)
		}
		closeLockers(shared)
	}
}

// loadRound runs up to ops cycles, for up to d, over g goroutines: on
// shared if it is set (the shared-client cells), else on a new implementation per goroutine, built
// now and dialling on its first call (a cold start, as g processes
// starting at once would have).
func (b *bench) loadRound(ctx context.Context, set *nodeSet, sp spec, shared locker, g, ops int, d time.Duration, tag string) *cellResult {
	res := &cellResult{}
	lockers := make([]locker, g)
	for w := range lockers {
		if shared != nil {
			lockers[w] = shared
			continue
		}
		l, err := sp.make(set.addrs)
		if err != nil {
			res.failed++
			res.firstErr = cmpStr(res.firstErr, err.Error())
		}
		lockers[w] = l
	}
	u0 := measureUsage(ctx, set.mon)
	start := time.Now()
	deadline := start.Add(d)
	var budget atomic.Int64
	budget.Store(int64(ops))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w, l := range lockers {
		if l == nil {
			continue
		}
		wg.Go(func() {
			mine := &cellResult{}
			for i := 0; budget.Add(-1) >= 0 && time.Now().Before(deadline); i++ {
				cycle(ctx, l, fmt.Sprintf("%s:%d:%d", tag, w, i), mine)
			}
			mu.Lock()
			res.add(mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	time.Sleep(20 * time.Millisecond) // calls still in flight after a majority land in this cell's figures
	res.use = measureUsage(ctx, set.mon).minus(u0)
	if shared == nil {
		closeLockers(lockers)
	}
	return res
}

// cycle is one TryLock+Unlock; a panic in an implementation counts as a
// failure rather than ending the run.
func cycle(ctx context.Context, l locker, key string, r *cellResult) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			r.failed++
			r.firstErr = cmpStr(r.firstErr, fmt.Sprint("panic: ", p))
		}
	}()
	t0 := time.Now()
	unlock, err := l.try(ctx, key)
	if err != nil {
		r.failed++
		r.firstErr = cmpStr(r.firstErr, err.Error())
		return
	}
	if err := unlock(ctx); err != nil {
		r.failedUnlock++
		r.firstErr = cmpStr(r.firstErr, "unlock: "+err.Error())
		return
	}
	r.lat = append(r.lat, time.Since(t0))
	r.ok++
}

// closeLockers closes in parallel: a client may wait a while for calls
// still in flight.
func closeLockers(ls []locker) {
	seen := map[locker]bool{}
	var wg sync.WaitGroup
	for _, l := range ls {
		if l == nil || seen[l] {
			continue
		}
		seen[l] = true
		wg.Go(func() {
			defer func() { recover() }()
			l.close()
		})
	}
	wg.Wait()
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
