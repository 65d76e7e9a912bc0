// Command bench measures this library against its peers on the same local
// redis-server nodes, in one run, and writes docs/benchmarks.md.
//
//	cd bench && go run . -out ../docs/benchmarks.md
//
// It is a module of its own so that the library never depends on the peers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

func main() {
	testing.Init() // testing.Benchmark measures allocations
	out := flag.String("out", "../docs/benchmarks.md", "where to write the report")
	chart := flag.String("chart", "../docs/benchmarks-nodes.svg", "where to write the latency chart")
	quick := flag.Bool("quick", false, "fewer iterations, for a smoke run")
	only := flag.String("only", "", "run one step (latency, scaling, faults, contention) and print it, without writing the report")
	flag.StringVar(&implFilter, "impl", "", "with -only: measure only the implementations whose name contains this")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *only == "" {
		implFilter = "" // the report needs every implementation
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
		defer pprof.StopCPUProfile()
	}
	redis.SetLogger(quiet{})
	if err := run(context.Background(), *out, *chart, *quick, *only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// implFilter, if set, keeps only the implementations whose name contains it.
var implFilter string

func measured(name string) bool { return strings.Contains(name, implFilter) }

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func run(ctx context.Context, out, chart string, quick bool, only string) error {
	g, err := node.StartProcesses(ctx, 9, node.Config{})
	if err != nil {
		return err
	}
	defer g.Close()
	clients := g.NewClients()
	defer node.CloseClients(clients)
	s := &suite{nodes: g, clients: clients, iters: 3000, contendFor: 3e9}
	if quick {
		s.iters, s.contendFor = 300, 1e9
	}
	r := &report{}
	steps := []struct {
		name string
		f    func(context.Context, *report) error
	}{
		{"latency", s.latency},
		{"scaling", s.scaling},
		{"faults", s.faults},
		{"contention", s.contention},
	}
	for _, st := range steps {
		if only != "" && st.name != only {
			continue
		}
		fmt.Fprintf(os.Stderr, "measuring %s...\n", st.name)
		if err := st.f(ctx, r); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	if only != "" {
		fmt.Printf("%+v\n", *r)
		return nil
	}
	return r.write(out, chart)
}
