package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
)

// The lock family's step (issue 25), on the fenced node set: each
// primitive's uncontended cycle against the mutex's, a read-heavy load on
// the read-write lock against the mutex on the same work, and the handoff
// fairness of a contended semaphore beside the mutex's. Its page is
// docs/benchmarks-family.md.

// familyRow is what one run measured.
type familyRow struct {
	p50        map[string]time.Duration // uncontended cycle, per primitive (fenced nodes)
	p50Plain   map[string]time.Duration // the same, unfenced, on the appendonly-no nodes
	readTput   float64                  // read-heavy load on the read-write lock, ops/s
	mutexTput  float64                  // the same work under the mutex, ops/s
	mixed      mixedCell                // the mixed load on the read-write lock
	mixedMutex mixedCell                // the same work under the mutex
	semLeast   float64                  // least share of acquisitions of a waiter, over a fair share
	mutexLeast float64
}

// The uncontended cycles, in the order of the report.
const (
	fMutex = "mutex: TryLock + Unlock"
	fRead  = "read lock: TryRLock + Unlock"
	fWrite = "write lock: TryLock + Unlock"
	fSem   = "permit (K=4): TryAcquire + Release"
	fMulti = "multi-lock, 4 names: TryLockMulti + Unlock"
)

var familyCycles = []string{fMutex, fRead, fWrite, fSem, fMulti}

const (
	familyWorkers = 8                    // goroutines of the read-heavy load and of the fairness cells
	familyWork    = 2 * time.Millisecond // the critical section's work
	familyWrites  = 10                   // percent of the read-heavy load's operations that write
	mixedWorkers  = 16                   // goroutines of the mixed load
	mixedWrites   = 20                   // percent of the mixed load's operations that write
)

// familyOptions are the clients' options in this step: fenced, and the
// retry delay at 1-5 ms for both sides, the best setting for a waiting
// mutex and for readers that retry.
var familyOptions = []redlock.Option{redlock.WithTTL(ttl), redlock.WithRetryDelay(time.Millisecond, 5*time.Millisecond)}

func (b *bench) familyStep(ctx context.Context, run int, set, plain *nodeSet, rd *runData) {
	row := &familyRow{}
	rd.family = row
	row.p50 = b.familyCycles(ctx, run, set.addrs)
	row.p50Plain = b.familyCycles(ctx, run, plain.addrs, redlock.WithoutFencing())
	row.mutexTput = b.readHeavy(ctx, set.addrs, fmt.Sprint("fam-rw-m:", run), false)
	row.readTput = b.readHeavy(ctx, set.addrs, fmt.Sprint("fam-rw-r:", run), true)
	row.mixedMutex = b.mixedLoad(ctx, set.addrs, fmt.Sprint("fam-mix-m:", run), false)
	row.mixed = b.mixedLoad(ctx, set.addrs, fmt.Sprint("fam-mix-r:", run), true)
	row.mutexLeast = b.fairness(ctx, set.addrs, fmt.Sprint("fam-fair-m:", run), 1)
	row.semLeast = b.fairness(ctx, set.addrs, fmt.Sprint("fam-fair-s:", run), 2)
}

// familyCycles times uncontended cycles of each primitive on new names,
// in turns, and returns each one's p50.
func (b *bench) familyCycles(ctx context.Context, run int, addrs []string, opts ...redlock.Option) map[string]time.Duration {
	c, close, err := familyClient(addrs, opts...)
	if err != nil {
		progress("family: %v", err)
		return nil
	}
	defer close()
	cycles := b.loadOps / 10
	samples := map[string][]time.Duration{}
	for turn := range b.loadRounds {
		for _, kind := range familyCycles {
			for i := range cycles / b.loadRounds {
				name := fmt.Sprintf("fam:%d:%d:%d:%d", run, turn, i, rand.Int())
				if d, ok := familyCycle(ctx, c, kind, name); ok {
					samples[kind] = append(samples[kind], d)
				}
			}
		}
	}
	p50 := map[string]time.Duration{}
	for kind, ds := range samples {
		p50[kind] = pct(ds, 0.5)
	}
	return p50
}

func familyClient(addrs []string, opts ...redlock.Option) (*redlock.Client, func(), error) {
	cs := newClients(addrs, false)
	c, err := redlock.New(cs, append(slices.Clone(familyOptions), opts...)...)
	if err != nil {
		closeAll(cs)
		return nil, nil, err
	}
	return c, func() { c.Close(); closeAll(cs) }, nil
}

// familyCycle times one uncontended acquisition and release of kind on a
// new name.
func familyCycle(ctx context.Context, c *redlock.Client, kind, name string) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	start := time.Now()
	var release func(context.Context) error
	switch kind {
	case fMutex:
		if l, err := c.TryLock(ctx, name); err == nil {
			release = l.Unlock
		}
	case fRead, fWrite:
		m, _ := c.RWMutex(name)
		try := m.TryLock
		if kind == fRead {
			try = m.TryRLock
		}
		if l, err := try(ctx); err == nil {
			release = l.Unlock
		}
	case fSem:
		s, _ := c.Semaphore(name, 4)
		if p, err := s.TryAcquire(ctx); err == nil {
			release = p.Release
		}
	case fMulti:
		if m, err := c.TryLockMulti(ctx, []string{name + ":a", name + ":b", name + ":c", name + ":d"}); err == nil {
			release = m.Unlock
		}
	}
	if release == nil || release(ctx) != nil {
		return 0, false
	}
	return time.Since(start), true
}

// acquire is one acquisition of a contended cell: worker w's i-th, by
// client c, within ctx; it returns the release, or nil if not acquired.
type acquire func(ctx context.Context, c *redlock.Client, w, i int) func(context.Context) error

// familyCell runs familyWorkers goroutines, each with its own client, for
// contendFor: each acquires with take, holds for familyWork and releases,
// again and again. It returns each worker's completed cycles, or nil if a
// client could not be built.
func (b *bench) familyCell(ctx context.Context, addrs []string, take acquire) []int64 {
	return b.familyCellOf(ctx, familyWorkers, addrs, take)
}

// familyCellOf is familyCell with workers goroutines.
func (b *bench) familyCellOf(ctx context.Context, workers int, addrs []string, take acquire) []int64 {
	clients := make([]*redlock.Client, workers)
	for w := range clients {
		c, close, err := familyClient(addrs)
		if err != nil {
			progress("family: %v", err)
			return nil
		}
		defer close()
		clients[w] = c
	}
	counts := make([]int64, workers)
	deadline := time.Now().Add(b.contendFor)
	var wg sync.WaitGroup
	for w, c := range clients {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				if release := take(octx, c, w, i); release != nil {
					time.Sleep(familyWork)
					if release(octx) == nil {
						counts[w]++
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	return counts
}

// readHeavy is a contended cell on one name: familyWrites percent of the
// operations hold the write lock (or, without rw, the mutex), the rest a
// read lock (the mutex). It returns the operations completed per second.
func (b *bench) readHeavy(ctx context.Context, addrs []string, name string, rw bool) float64 {
	counts := b.familyCell(ctx, addrs, func(ctx context.Context, c *redlock.Client, w, i int) func(context.Context) error {
		write := (i*familyWorkers+w)%100 < familyWrites
		return rwTake(ctx, c, name, rw, write)
	})
	if counts == nil {
		return nan
	}
	var done int64
	for _, n := range counts {
		done += n
	}
	return float64(done) / b.contendFor.Seconds()
}

// rwTake is one operation of the read-heavy and mixed cells: the write
// lock or a read lock of the read-write lock name, or, without rw, its
// mutex for either. It returns the release, or nil if not acquired.
func rwTake(ctx context.Context, c *redlock.Client, name string, rw, write bool) func(context.Context) error {
	m, _ := c.RWMutex(name)
	switch {
	case !rw:
		if l, err := c.Lock(ctx, name); err == nil {
			return l.Unlock
		}
	case write:
		if l, err := m.Lock(ctx); err == nil {
			return l.Unlock
		}
	default:
		if l, err := m.RLock(ctx); err == nil {
			return l.Unlock
		}
	}
	return nil
}

// mixedCell is what a mixed load measured: operations per second, and the
// longest a reader and a writer waited for a hold (acquisitions that gave
// up count with their whole wait).
type mixedCell struct {
	tput                float64
	readWait, writeWait time.Duration
}

// mixedLoad is a contended cell on one name, mixedWorkers goroutines:
// mixedWrites percent of the operations take the write lock (or, without
// rw, the mutex for every operation), the rest a read lock.
func (b *bench) mixedLoad(ctx context.Context, addrs []string, name string, rw bool) mixedCell {
	var mu sync.Mutex
	var cell mixedCell
	longest := func(d *time.Duration, start time.Time) {
		mu.Lock()
		*d = max(*d, time.Since(start))
		mu.Unlock()
	}
	counts := b.familyCellOf(ctx, mixedWorkers, addrs, func(ctx context.Context, c *redlock.Client, w, i int) func(context.Context) error {
		write := (i*mixedWorkers+w)%100 < mixedWrites
		start := time.Now()
		wait := &cell.readWait
		if write {
			wait = &cell.writeWait
		}
		defer longest(wait, start)
		return rwTake(ctx, c, name, rw, write)
	})
	if counts == nil {
		return mixedCell{tput: nan}
	}
	var done int64
	for _, n := range counts {
		done += n
	}
	cell.tput = float64(done) / b.contendFor.Seconds()
	return cell
}

// fairness is a contended cell on a semaphore of permits (1: the mutex);
// it returns the least share of acquisitions a goroutine got, over a fair
// share (1 is perfectly fair).
func (b *bench) fairness(ctx context.Context, addrs []string, name string, permits int) float64 {
	counts := b.familyCell(ctx, addrs, func(ctx context.Context, c *redlock.Client, _, _ int) func(context.Context) error {
		if permits == 1 {
			if l, err := c.Lock(ctx, name); err == nil {
				return l.Unlock
			}
			return nil
		}
		s, _ := c.Semaphore(name, permits)
		if p, err := s.Acquire(ctx); err == nil {
			return p.Release
		}
		return nil
	})
	if counts == nil {
		return nan
	}
	var total, least int64 = 0, -1
	for _, n := range counts {
		total += n
		if least < 0 || n < least {
			least = n
		}
	}
	if total == 0 {
		return nan
	}
	return float64(least) / (float64(total) / familyWorkers)
}

// writeFamily writes the family's page.
func (r *report) writeFamily(out string) error {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	p("# Benchmarks: the lock family\n\n")
	p("Generated by `make bench` (`cd bench && go run . -only family`) on %s, %d run(s), on the fenced node set (%s; ",
		r.started.UTC().Format("2006-01-02"), len(r.runs), r.setOf(true))
	p("the unfenced rows on the other set, %s, with `WithoutFencing()`), ", r.setOf(false))
	p("%d cores, %s. Each figure is a ratio (or share) computed within one run; the table shows its median over ", runtime.NumCPU(), runtime.Version())
	p("the runs and, in brackets, the least and greatest. Clients use `WithTTL(10s)` and `WithRetryDelay(1ms, 5ms)` ")
	p("on both sides of every comparison.\n\n")
	p("| figure | median [range] | target (issues 25, 34) | verdict |\n|---|---|---|---|\n")
	f2 := func(s spread, unit string) string {
		if s.n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f%s [%.2f–%.2f]", s.med, unit, s.lo, s.hi)
	}
	get := func(f func(*familyRow) float64) spread {
		var xs []float64
		for _, rd := range r.runs {
			if rd.family != nil {
				xs = append(xs, f(rd.family))
			}
		}
		return spreadOf(xs)
	}
	verdict := func(s spread, ok bool) string {
		if s.n == 0 {
			return "no figure"
		}
		if ok {
			return "met"
		}
		return "missed"
	}
	for _, kind := range familyCycles[1:] {
		s := get(func(f *familyRow) float64 {
			return ratioPos(float64(f.p50[kind]), float64(f.p50[fMutex]))
		})
		target, v := "within 1.3x", verdict(s, s.med <= 1.3)
		switch kind {
		case fWrite:
			target, v = "-", "-"
		case fRead:
			target, v = "within 1.1x (issue 34)", verdict(s, s.med <= 1.1)
		}
		p("| uncontended %s, p50 / the mutex's | %s | %s | %s |\n", kind, f2(s, "x"), target, v)
	}
	for _, kind := range familyCycles[1:] {
		s := get(func(f *familyRow) float64 {
			return ratioPos(float64(f.p50Plain[kind]), float64(f.p50Plain[fMutex]))
		})
		target, v := "within 1.3x", verdict(s, s.med <= 1.3)
		if kind == fWrite {
			target, v = "-", "-"
		}
		p("| unfenced (`appendonly no` nodes): %s, p50 / the mutex's | %s | %s | %s |\n", kind, f2(s, "x"), target, v)
	}
	s := get(func(f *familyRow) float64 { return ratioF(f.readTput, f.mutexTput) })
	p("| read-heavy load (%d goroutines, %d%% writes, %v of work each): read-write lock ops/s / the mutex's | %s | at least 3x | %s |\n",
		familyWorkers, familyWrites, familyWork, f2(s, "x"), verdict(s, s.med >= 3))
	s = get(func(f *familyRow) float64 { return ratioF(f.mixed.tput, f.mixedMutex.tput) })
	p("| mixed load (%d goroutines, %d%% writes, %v of work each): read-write lock ops/s / the mutex's | %s | - | - |\n",
		mixedWorkers, mixedWrites, familyWork, f2(s, "x"))
	ms := func(f func(*familyRow) time.Duration) string {
		s := get(func(r *familyRow) float64 { return float64(f(r).Milliseconds()) })
		if s.n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f ms [%.0f–%.0f]", s.med, s.lo, s.hi)
	}
	p("| mixed load: the longest wait of a reader (read-write lock) | %s | one writer phase (issue 34) | - |\n", ms(func(f *familyRow) time.Duration { return f.mixed.readWait }))
	p("| mixed load: the longest wait of a writer (read-write lock) | %s | the writers ahead, and one reader phase more than them | - |\n", ms(func(f *familyRow) time.Duration { return f.mixed.writeWait }))
	p("| mixed load: the longest wait of any caller under the mutex, same work | %s | - | - |\n",
		ms(func(f *familyRow) time.Duration { return max(f.mixedMutex.readWait, f.mixedMutex.writeWait) }))
	s = get(func(f *familyRow) float64 { return f.semLeast })
	m := get(func(f *familyRow) float64 { return f.mutexLeast })
	p("| semaphore (K=2) handoff fairness: least share of a waiter / a fair share, %d goroutines | %s | shown beside the mutex's | - |\n", familyWorkers, f2(s, ""))
	p("| the mutex's, same cell | %s | - | - |\n", f2(m, ""))
	var abs []string
	for _, kind := range familyCycles {
		v := get(func(f *familyRow) float64 { return float64(f.p50[kind].Microseconds()) })
		abs = append(abs, fmt.Sprintf("%s %.0f µs [%.0f–%.0f]", kind, v.med, v.lo, v.hi))
	}
	p("\nAbsolute p50s, fenced (this machine only): %s.\n\n", strings.Join(abs, "; "))
	p("How: each run times %d uncontended cycles of each primitive on new names, in %d turns that alternate the primitives; ",
		r.bench.loadOps/10, r.bench.loadRounds)
	p("the read-heavy and fairness cells run %d goroutines, each with its own client, for %v on one name. ", familyWorkers, r.bench.contendFor)
	p("The read-heavy cell's writers use the write lock (the mutex's: Lock), its readers RLock (the mutex's: Lock), ")
	p("each then sleeps %v before unlocking. A fair share is the cell's acquisitions over %d.\n", familyWork, familyWorkers)
	return os.WriteFile(out, []byte(sb.String()), 0o644)
}
