package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// bench holds the sizes of one report: -quick shrinks them.
type bench struct {
	runs          int
	loadOps       int           // per implementation per cell, over all turns
	loadFor       time.Duration // likewise
	loadRounds    int           // turns the implementations take in a cell
	faultAttempts int
	contendFor    time.Duration
	steps         map[string]bool
	lockFile      string
	familyOut     string // the family step's page
}

// hold takes the -lockfile lock, if any, until the returned release.
func (b *bench) hold() (release func()) {
	if b.lockFile == "" {
		return func() {}
	}
	f, err := os.OpenFile(b.lockFile, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		progress("cannot open %s, running without it: %v", b.lockFile, err)
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		progress("cannot lock %s, running without it: %v", b.lockFile, err)
	}
	return func() { f.Close() }
}

// nodeSet is five local nodes with one persistence setting, and a
// monitoring client per node.
type nodeSet struct {
	label string
	g     node.Group
	addrs []string
	mon   []redis.UniversalClient
}

func startSet(ctx context.Context, label string, p node.Persistence) (*nodeSet, error) {
	g, err := node.StartProcesses(ctx, 5, node.Config{Persistence: p})
	if err != nil {
		return nil, err
	}
	return &nodeSet{label: label, g: g, addrs: g.Addrs(), mon: newClients(g.Addrs(), true)}, nil
}

func (s *nodeSet) close() {
	closeAll(s.mon)
	s.g.Close()
}

// runData is everything one run measured.
type runData struct {
	load       map[cellKey]map[string]*cellResult
	faults     map[faultKey]*faultRow
	contention map[contKey]*contRow
	family     *familyRow
	own        map[bool]*ownRow                // per fenced: the own-names step
	failover   map[time.Duration]time.Duration // per TTL: the failover step
}

func (b *bench) measure(ctx context.Context, out string) error {
	plain, err := startSet(ctx, "appendonly no", node.PersistNone)
	if err != nil {
		return err
	}
	defer plain.close()
	aof, err := startSet(ctx, "appendonly yes, appendfsync always", node.PersistAOFAlways)
	if err != nil {
		return err
	}
	defer aof.close()
	rep := &report{bench: b, plain: plain.label, aof: aof.label, started: time.Now()}
	if err := provision(ctx, aof.addrs); err != nil {
		rep.problems = append(rep.problems, fmt.Sprint("provisioning the fenced nodes failed: ", err))
	}
	best, defaults := redsyncSpecs()
	unfenced := append(floorSpecs(), oursSpec(false), best, defaults, bsmSpec())
	fenced := append(floorSpecs(), oursSpec(true), best)
	for run := range b.runs {
		rd := &runData{load: map[cellKey]map[string]*cellResult{}, faults: map[faultKey]*faultRow{},
			contention: map[contKey]*contRow{}}
		release := b.hold()
		t0 := time.Now()
		if b.steps["load"] {
			progress("run %d: load", run+1)
			b.loadStep(ctx, run, plain, false, unfenced, rd)
			b.loadStep(ctx, run, aof, true, fenced, rd)
		}
		if b.steps["faults"] {
			progress("run %d: faults", run+1)
			b.faultStep(ctx, run, plain, false, []spec{oursSpec(false), best, defaults}, rd)
			b.faultStep(ctx, run, aof, true, []spec{oursSpec(true), best}, rd)
		}
		if b.steps["contention"] {
			progress("run %d: contention", run+1)
			b.contentionStep(ctx, run, plain, false, []spec{counted(false), best, defaults}, rd)
			b.contentionStep(ctx, run, aof, true, []spec{counted(true), best}, rd)
		}
		if b.steps["own"] {
			progress("run %d: own names", run+1)
			b.ownStep(ctx, plain, false, rd)
			b.ownStep(ctx, aof, true, rd)
		}
		if b.steps["failover"] {
			progress("run %d: failover", run+1)
			b.failoverStep(ctx, aof, run, rd)
		}
		if b.steps["family"] {
			progress("run %d: family", run+1)
			b.familyStep(ctx, run, aof, plain, rd)
		}
		release()
		rep.runs = append(rep.runs, rd)
		progress("run %d took %v", run+1, time.Since(t0).Round(time.Second))
		// Written after every run, so that an interrupted report still
		// holds the runs it finished.
		rep.specs = append(slices.Clone(unfenced), oursSpec(true))
		if b.steps["family"] {
			if err := rep.writeFamily(b.familyOut); err != nil {
				return err
			}
		}
		if b.steps["load"] || b.steps["faults"] || b.steps["contention"] || b.steps["own"] || b.steps["failover"] {
			if err := rep.write(out); err != nil {
				return err
			}
		}
	}
	return nil
}

// provision gives the fenced nodes their fencing ids.
func provision(ctx context.Context, addrs []string) error {
	cs := newClients(addrs, true)
	defer closeAll(cs)
	c, err := redlock.New(cs)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.Provision(ctx)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// spread is a median over runs with its range.
type spread struct {
	med, lo, hi float64
	n           int
}

// spreadOf ignores NaN entries (a run where the figure could not be
// computed, such as a ratio over zero).
func spreadOf(xs []float64) spread {
	xs = slices.DeleteFunc(slices.Clone(xs), func(x float64) bool { return x != x })
	if len(xs) == 0 {
		return spread{n: 0}
	}
	slices.Sort(xs)
	m := len(xs) / 2
	med := xs[m]
	if len(xs)%2 == 0 {
		med = (xs[m-1] + xs[m]) / 2
	}
	return spread{med: med, lo: xs[0], hi: xs[len(xs)-1], n: len(xs)}
}

// ratioF is a/b, NaN (no figure) when b is 0.
func ratioF(a, b float64) float64 {
	if b == 0 {
		return nan
	}
	return a / b
}

// ratioPos is a/b for figures where 0 means missing (a latency of a cell
// with no successful cycle): NaN when either is 0.
func ratioPos(a, b float64) float64 {
	if a == 0 {
		return nan
	}
	return ratioF(a, b)
}

var nan = func() float64 { z := 0.0; return z / z }()
