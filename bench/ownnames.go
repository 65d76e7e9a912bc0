package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// The own-names step (issue 35): TestLoadOwnNames's largest cell, too heavy
// for make test. Every goroutine has its own client and one lock name,
// which it takes again at once after its Unlock: its own release may still
// be in flight on a slow node, and must never be reported as another
// owner's hold (ErrLocked). Nobody else touches the names, so every
// ErrLocked is the library's fault; other failures (nodes too slow to
// answer under this load) are counted apart.
const (
	ownGoroutines = 1024
	ownOps        = 8000
	ownFor        = 15 * time.Second
)

// ownRow is one run of the step on one node set.
type ownRow struct {
	attempts, locked, failed int
	firstLocked, firstFailed string
	took                     time.Duration
}

func (b *bench) ownStep(ctx context.Context, set *nodeSet, fenced bool, rd *runData) {
	row := &ownRow{}
	if rd.own == nil {
		rd.own = map[bool]*ownRow{}
	}
	rd.own[fenced] = row
	opts := []redlock.Option{redlock.WithTTL(ttl)}
	if !fenced {
		opts = append(opts, redlock.WithoutFencing())
	}
	type client struct {
		c    *redlock.Client
		done func()
	}
	clients := make([]client, ownGoroutines)
	for i := range clients {
		l, err := newOurs(set.addrs, opts...)
		if err != nil {
			row.failed++
			row.firstFailed = err.Error()
			for _, c := range clients[:i] {
				c.done()
			}
			return
		}
		clients[i] = client{l.(*ours).c, l.close}
	}
	defer func() {
		for _, c := range clients {
			c.done()
		}
	}()
	var mu sync.Mutex
	budget := ownOps
	deadline := time.Now().Add(ownFor)
	start := time.Now()
	var wg sync.WaitGroup
	for g, c := range clients {
		name := fmt.Sprintf("own-%t-%d", fenced, g)
		wg.Go(func() {
			for {
				mu.Lock()
				if budget == 0 || time.Now().After(deadline) {
					mu.Unlock()
					return
				}
				budget--
				row.attempts++
				mu.Unlock()
				l, err := c.c.TryLock(ctx, name)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err == nil {
					continue
				}
				mu.Lock()
				if errors.Is(err, redlock.ErrLocked) {
					row.locked++
					if row.firstLocked == "" {
						row.firstLocked = err.Error()
					}
				} else {
					row.failed++
					if row.firstFailed == "" {
						row.firstFailed = err.Error()
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	row.took = time.Since(start)
}

// ownTable reports the step: the target (no own-name ErrLocked in any run)
// and what else failed.
func (r *report) ownTable(p func(string, ...any)) {
	if len(r.runs) == 0 || r.runs[0].own == nil {
		return
	}
	p("\n## Own names at %d goroutines (issue 35)\n\n", ownGoroutines)
	p("Each goroutine has its own client and one name, taken again at once after its Unlock (`TestLoadOwnNames`'s ")
	p("largest cell, too heavy for `make test`); up to %d attempts or %v per run. Nobody else holds the names, so an ", ownOps, ownFor)
	p("`ErrLocked` can only be the client's own release still in flight, reported as another owner.\n\n")
	p("| node set | attempts | own-name ErrLocked (target: 0 in every run) | other failures | verdict |\n|---|---|---|---|---|\n")
	for _, fenced := range []bool{false, true} {
		get := func(f func(o *ownRow) float64) spread {
			return r.across(func(rd *runData) float64 {
				if o := rd.own[fenced]; o != nil {
					return f(o)
				}
				return 0
			})
		}
		att := get(func(o *ownRow) float64 { return float64(o.attempts) })
		locked := get(func(o *ownRow) float64 { return float64(o.locked) })
		failed := get(func(o *ownRow) float64 { return float64(o.failed) })
		p("| %s | %.0f [%.0f–%.0f] | %.0f [%.0f–%.0f] | %.0f [%.0f–%.0f] | %s |\n", r.setOf(fenced),
			att.med, att.lo, att.hi, locked.med, locked.lo, locked.hi, failed.med, failed.lo, failed.hi,
			verdict(locked.hi == 0 && att.lo > 0, locked))
	}
	for i, rd := range r.runs {
		for _, fenced := range []bool{false, true} {
			if o := rd.own[fenced]; o != nil && (o.firstLocked != "" || o.firstFailed != "") {
				p("\nRun %d, %s: first ErrLocked %q; first other failure %q.\n", i+1, r.setOf(fenced), o.firstLocked, o.firstFailed)
			}
		}
	}
}
