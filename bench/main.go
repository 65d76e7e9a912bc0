// Command bench measures this library against floors and peers on the
// same local redis-server nodes, over several independent runs, and writes
// docs/benchmarks.md.
//
//	cd bench && go run . -out ../docs/benchmarks.md     # the full report, 5 runs
//	cd bench && go run . -quick                         # a smoke run, written to a temporary file
//
// It is a module of its own so that the library never depends on the peers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	out := flag.String("out", "", "where to write the report (default ../docs/benchmarks.md, or a temporary file with -quick or -only)")
	quick := flag.Bool("quick", false, "2 runs of small cells, for a smoke run (about 2 minutes)")
	runs := flag.Int("runs", 5, "independent runs; every figure is the median over them")
	only := flag.String("only", "", "comma-separated steps to run (load, faults, contention, own, failover, family); default all")
	familyOut := flag.String("family-out", "", "where to write the lock family's page (default ../docs/benchmarks-family.md, or a temporary file with -quick)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	lockFile := flag.String("lockfile", "", "hold an exclusive flock on this file during each run (not between runs), so that each run measures alone")
	flag.Parse()

	b := &bench{runs: *runs, loadOps: 3000, loadFor: 2 * time.Second, loadRounds: 3, faultAttempts: 300,
		contendFor: 2 * time.Second, lockFile: *lockFile, steps: map[string]bool{"load": true, "faults": true, "contention": true, "own": true, "failover": true, "family": true}}
	if *quick {
		b.runs, b.loadOps, b.loadFor, b.loadRounds, b.faultAttempts, b.contendFor = 2, 300, 300*time.Millisecond, 2, 40, 500*time.Millisecond
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "runs" {
				b.runs = *runs
			}
		})
	}
	b.runs = max(b.runs, 1)
	if *only != "" {
		b.steps = map[string]bool{}
		for _, s := range strings.Split(*only, ",") {
			b.steps[strings.TrimSpace(s)] = true
		}
	}
	if *out == "" {
		*out = "../docs/benchmarks.md"
		if *quick || *only != "" {
			*out = filepath.Join(os.TempDir(), "redlock-benchmarks-quick.md")
		}
	}
	if b.familyOut = *familyOut; b.familyOut == "" {
		b.familyOut = "../docs/benchmarks-family.md"
		if *quick {
			b.familyOut = filepath.Join(os.TempDir(), "redlock-benchmarks-family-quick.md")
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	redis.SetLogger(quiet{})
	err := b.measure(context.Background(), *out)
	pprof.StopCPUProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if b.steps["load"] || b.steps["faults"] || b.steps["contention"] || b.steps["own"] || b.steps["failover"] {
		fmt.Fprintln(os.Stderr, "bench: wrote", *out)
	}
	if b.steps["family"] {
		fmt.Fprintln(os.Stderr, "bench: wrote", b.familyOut)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
