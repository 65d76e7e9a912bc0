package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

type suite struct {
	nodes      node.Group
	clients    []redis.UniversalClient
	iters      int
	contendFor time.Duration
}

type impl struct {
	name string
	l    locker
}

// fresh returns new go-redis clients for the first n nodes, so that one
// implementation's stuck connections never slow another's.
func (s *suite) fresh(n int) ([]redis.UniversalClient, func()) {
	cs := make([]redis.UniversalClient, n)
	for i := range n {
		cs[i] = redis.NewClient(&redis.Options{Addr: s.nodes[i].Addr()})
	}
	return cs, func() { node.CloseClients(cs) }
}

func (s *suite) impls(n int) []impl {
	cs := s.clients[:n]
	return []impl{
		{"floor: raw SET NX fan-out", &floor{cs}},
		{"redlock, unfenced", mustOurs(cs, redlock.WithoutFencing())},
		{"redlock, fenced", mustOurs(cs)},
		{"redsync v4 (defaults)", newRedsync(cs)},
		{"bsm/redislock (1 node)", &bsmLocker{redislock.New(s.clients[0])}},
	}
}

// provision gives all nine nodes fencing ids at once, so that any subset
// has unique ids.
func (s *suite) provision(ctx context.Context) error {
	c, err := redlock.New(s.clients)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Provision(ctx)
}

// timeOps runs iters try+unlock cycles over g goroutines on distinct keys
// and returns each cycle's duration.
func timeOps(ctx context.Context, l locker, g, iters int, prefix string) ([]time.Duration, error) {
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			key := fmt.Sprintf("%s:%d", prefix, w)
			ds := make([]time.Duration, 0, iters/g)
			for range iters / g {
				t0 := time.Now()
				unlock, err := l.try(ctx, key)
				if err == nil {
					err = unlock(ctx)
				}
				ds = append(ds, time.Since(t0))
				if err != nil {
					mu.Lock()
					firstErr = cmp(firstErr, err)
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			all = append(all, ds...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, firstErr
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

type latRow struct {
	name       string
	goroutines int
	p50, p99   time.Duration
	allocs     int64
}

func (s *suite) latency(ctx context.Context, r *report) error {
	if err := s.provision(ctx); err != nil {
		return err
	}
	all := s.impls(5)
	defer func() {
		for _, im := range all {
			im.l.close()
		}
	}()
	impls := slices.DeleteFunc(slices.Clone(all), func(im impl) bool { return !measured(im.name) })
	for _, g := range []int{1, 8} {
		ds, err := interleaved(ctx, impls, g, s.iters, fmt.Sprintf("lat:%d", g))
		if err != nil {
			return err
		}
		for j, im := range impls {
			row := latRow{name: im.name, goroutines: g, p50: pct(ds[j], 0.5), p99: pct(ds[j], 0.99)}
			if g == 1 {
				res := testing.Benchmark(func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if unlock, err := im.l.try(ctx, "allocs"); err == nil {
							unlock(ctx)
						}
					}
				})
				row.allocs = res.AllocsPerOp()
			}
			r.latency = append(r.latency, row)
		}
	}
	return nil
}

// interleavedRounds is how many turns the implementations take in
// interleaved.
const interleavedRounds = 10

// interleaved times iters cycles of each implementation (timeOps), in
// turns, so that the noise of a shared two-core machine (a burst of work
// elsewhere, a slow phase of the scheduler) falls on all of them alike
// rather than on whichever ran at the time.
func interleaved(ctx context.Context, impls []impl, g, iters int, prefix string) ([][]time.Duration, error) {
	ds := make([][]time.Duration, len(impls))
	for range interleavedRounds {
		for j, im := range impls {
			d, err := timeOps(ctx, im.l, g, iters/interleavedRounds, prefix)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", im.name, err)
			}
			ds[j] = append(ds[j], d...)
		}
	}
	return ds, nil
}

type scaleRow struct {
	nodes int
	p50   map[string]time.Duration
}

func (s *suite) scaling(ctx context.Context, r *report) error {
	for _, n := range []int{1, 3, 5, 7, 9} {
		row := scaleRow{nodes: n, p50: map[string]time.Duration{}}
		all := s.impls(n)
		ds, err := interleaved(ctx, all[:3], 1, s.iters/3, fmt.Sprintf("scale:%d", n))
		for _, im := range all {
			im.l.close()
		}
		if err != nil {
			return fmt.Errorf("on %d nodes: %w", n, err)
		}
		for j, im := range all[:3] {
			row.p50[im.name] = pct(ds[j], 0.5)
		}
		r.scaling = append(r.scaling, row)
	}
	return nil
}

type faultRow struct {
	name   string
	paused int
	n      int
	p50    time.Duration
	p99    time.Duration
	failed int
	// goroutines is how many more goroutines the process had after the
	// attempts than before, with the nodes still paused: calls stuck on
	// them, and releases waiting to be retried.
	goroutines int
}

// faults measures the time to acquire with 0, 1 and 2 of 5 nodes paused.
func (s *suite) faults(ctx context.Context, r *report) error {
	type mk struct {
		name  string
		iters int
		make  func([]redis.UniversalClient) locker
	}
	makers := []mk{
		{"redlock, unfenced", s.iters / 3, func(cs []redis.UniversalClient) locker { return mustOurs(cs, redlock.WithoutFencing()) }},
		{"redlock, fenced", s.iters / 3, func(cs []redis.UniversalClient) locker { return mustOurs(cs) }},
		{"redsync v4 (defaults)", 10, func(cs []redis.UniversalClient) locker { return newRedsync(cs) }},
	}
	for _, paused := range []int{0, 1, 2} {
		for _, m := range makers {
			if !measured(m.name) {
				continue
			}
			cs, closeClients := s.fresh(5)
			l := m.make(cs)
			for i := range paused {
				if err := s.nodes[4-i].Pause(ctx); err != nil {
					return err
				}
			}
			row := faultRow{name: m.name, paused: paused}
			time.Sleep(200 * time.Millisecond) // the previous row's clients finish closing
			goroutines := runtime.NumGoroutine()
			var ds []time.Duration
			for i := range m.iters {
				key := fmt.Sprintf("fault:%d:%s:%d", paused, m.name, i)
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				unlock, err := l.try(cctx, key)
				ds = append(ds, time.Since(t0))
				if err != nil {
					row.failed++
				} else {
					unlock(cctx)
				}
				cancel()
			}
			row.goroutines = runtime.NumGoroutine() - goroutines
			for i := range paused {
				s.nodes[4-i].Resume(ctx)
			}
			l.close()
			closeClients()
			row.n, row.p50, row.p99 = len(ds), pct(ds, 0.5), pct(ds, 0.99)
			r.faults = append(r.faults, row)
		}
	}
	return nil
}

type contRow struct {
	name         string
	hold         time.Duration
	acquisitions int
	handoffs     int
	seconds      float64
	medianWait   time.Duration
	worstWait    time.Duration
	// coldWorstWait is the worst wait of the warm-up, from fresh clients.
	coldWorstWait time.Duration
	minShare      float64
	failed        int
	perGoroutine  []int
	// attemptsPerAcq is how many acquisition attempts (TryLock rounds, as
	// our observer reports them) each acquisition took; 0 for the peers.
	attemptsPerAcq float64
}

// attempts counts our clients' acquisition attempts in a contention run.
var attempts atomic.Int64

// countAttempts is the observer of our clients in a contention run.
var countAttempts = redlock.WithObserver(redlock.ObserverFunc(func(_ context.Context, ev redlock.Event) {
	if ev.Op == "lock" {
		attempts.Add(1)
	}
}))

// contention: 8 goroutines, one key, each with its own client (as separate
// processes would be), for a fixed time.
func (s *suite) contention(ctx context.Context, r *report) error {
	const workers = 8
	type mk struct {
		name string
		make func([]redis.UniversalClient) locker
	}
	makers := []mk{
		{"redlock, unfenced", func(cs []redis.UniversalClient) locker { return mustOurs(cs, redlock.WithoutFencing(), countAttempts) }},
		{"redlock, fenced", func(cs []redis.UniversalClient) locker { return mustOurs(cs, countAttempts) }},
		{"redsync v4 (defaults)", func(cs []redis.UniversalClient) locker { return newRedsync(cs) }},
	}
	for _, hold := range []time.Duration{0, time.Millisecond} {
		for _, m := range makers {
			if !measured(m.name) {
				continue
			}
			row, err := s.contend(ctx, m.name, m.make, workers, hold)
			if err != nil {
				return err
			}
			r.contention = append(r.contention, row)
		}
	}
	return nil
}

// contendWarmUp is how long the workers contend before the clock starts:
// they dial their connections and, for us, open their subscriptions. The
// waits of the warm-up are reported apart, as the cold start.
const contendWarmUp = 300 * time.Millisecond

// contend runs workers goroutines, each with its own clients, that lock
// one key, hold it for hold, and unlock, over and over.
func (s *suite) contend(ctx context.Context, name string, newLocker func([]redis.UniversalClient) locker,
	workers int, hold time.Duration) (contRow, error) {
	type acq struct {
		w  int
		at time.Time
	}
	var mu sync.Mutex
	var acqs []acq
	var waits, coldWaits []time.Duration
	failed := 0
	key := fmt.Sprintf("contend:%s:%v", name, hold)
	lockers := make([]locker, workers)
	for w := range workers {
		cs, closeClients := s.fresh(5)
		defer closeClients()
		lockers[w] = newLocker(cs)
		defer lockers[w].close()
	}
	phase := func(until time.Time, measured bool) {
		var wg sync.WaitGroup
		for w, l := range lockers {
			wg.Go(func() {
				for time.Now().Before(until) {
					cctx, cancel := context.WithDeadline(ctx, until)
					t0 := time.Now()
					unlock, err := l.lock(cctx, key)
					cancel()
					wait := time.Since(t0)
					mu.Lock()
					switch {
					case err != nil && measured && time.Now().Before(until):
						failed++
					case err == nil && measured:
						acqs = append(acqs, acq{w, time.Now()})
						waits = append(waits, wait)
					case err == nil:
						coldWaits = append(coldWaits, wait)
					}
					mu.Unlock()
					if err != nil {
						continue
					}
					if hold > 0 {
						time.Sleep(hold)
					}
					unlock(context.Background())
				}
			})
		}
		wg.Wait()
	}
	phase(time.Now().Add(contendWarmUp), false)
	attempts.Store(0)
	phase(time.Now().Add(s.contendFor), true)
	tries := attempts.Load()

	slices.SortFunc(acqs, func(a, b acq) int { return a.at.Compare(b.at) })
	row := contRow{name: name, hold: hold, acquisitions: len(acqs), seconds: s.contendFor.Seconds(),
		failed: failed, perGoroutine: make([]int, workers), coldWorstWait: pct(coldWaits, 1)}
	if len(acqs) > 0 {
		row.attemptsPerAcq = float64(tries) / float64(len(acqs))
	}
	for i, a := range acqs {
		row.perGoroutine[a.w]++
		if i > 0 && acqs[i-1].w != a.w {
			row.handoffs++
		}
	}
	row.medianWait, row.worstWait = pct(waits, 0.5), pct(waits, 1)
	if len(acqs) > 0 {
		row.minShare = float64(slices.Min(row.perGoroutine)) / (float64(len(acqs)) / float64(workers))
	}
	return row, nil
}
