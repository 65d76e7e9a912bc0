// Command redlock-chaos runs the fault scenarios of package chaos against
// local nodes and checks their histories, and starts local redis-server
// nodes for development:
//
//	redlock-chaos chaos [--scenario all] [--duration 4s] [--report FILE] [--json]
//	redlock-chaos nodes up [-n 5] [--json]
//
// It is a command of its own, apart from the operator's redlock, because it
// links the test harness (package node imports testing, for
// node.RequireDocker) and the Docker client; redlock ships without either.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/chaos"
	"github.com/quorumlock/redlock/internal/procguard"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

const usage = `usage:
  redlock-chaos chaos [flags]      run fault scenarios against local nodes and check the history
                                   (exit 1 if a run fails its verdict)
  redlock-chaos nodes up [flags]   start local redis-server nodes and print their addresses;
                                   Ctrl-C stops them and deletes their data (so does any end
                                   of this command, SIGKILL included)

Run "redlock-chaos chaos -h" for the flags. Exit codes: 0 success, 1 failure, 2 bad flags or command.
`

func main() {
	// This executable is also nodes up's guardian (internal/procguard).
	procguard.Main()
	// go-redis logs every failed dial to a faulted node; the report says it better.
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "redlock-chaos:", strings.TrimPrefix(err.Error(), "redlock: "))
		var ue usageErr
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// usageErr is bad input: exit 2.
type usageErr struct{ error }

func (e usageErr) Unwrap() error { return e.error }

// usageError is the outcome of a flag parse error: -h is a success (flag
// printed the usage), anything else is bad input.
func usageError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return usageErr{err}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	switch {
	case len(args) >= 1 && args[0] == "chaos":
		return runChaos(ctx, args[1:], out)
	case len(args) >= 2 && args[0] == "nodes" && args[1] == "up":
		return nodesUp(ctx, args[2:], out)
	case len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help"):
		fmt.Fprint(out, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return usageErr{fmt.Errorf("unknown command %q", strings.Join(args, " "))}
}

func runChaos(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	names := fs.String("scenario", "all", "comma-separated scenario names, or all: "+scenarioNames())
	duration := fs.Duration("duration", 4*time.Second, "how long each run's workload lasts")
	ttl := fs.Duration("ttl", time.Second, "lock TTL")
	workers := fs.Int("workers", 4, "concurrent lock clients")
	fencing := fs.String("fencing", "both", "run with fencing on, off, or both")
	backend := fs.String("backend", "process", "node backend: process or docker")
	image := fs.String("image", "", "docker backend: image to run (default: built from the host's redis-server)")
	report := fs.String("report", "chaos-report.html", "where to write the HTML report (empty: none)")
	asJSON := fs.Bool("json", false, "print the verdicts and findings as JSON instead of tables")
	family := fs.String("family", "", "also run the lock family's workloads ("+strings.Join(chaos.Primitives, ",")+
		", or all) under -family-scenarios")
	familyScenarios := fs.String("family-scenarios", strings.Join(chaos.FamilyScenarios, ","), "the scenarios the -family workloads run")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	var scenarios []chaos.Scenario
	if *names == "all" {
		scenarios = chaos.Scenarios
	} else {
		for _, n := range strings.Split(*names, ",") {
			s, ok := chaos.Lookup(strings.TrimSpace(n))
			if !ok {
				return usageErr{fmt.Errorf("no scenario %q (have %s)", n, scenarioNames())}
			}
			scenarios = append(scenarios, s)
		}
	}
	var modes []bool
	switch *fencing {
	case "both":
		modes = []bool{false, true}
	case "on":
		modes = []bool{true}
	case "off":
		modes = []bool{false}
	default:
		return usageErr{errors.New("-fencing must be on, off or both")}
	}
	var be chaos.Backend
	switch *backend {
	case "process":
		be = chaos.Processes{}
	case "docker":
		be = chaos.Containers{Image: *image}
	default:
		return usageErr{fmt.Errorf("unknown backend %q", *backend)}
	}

	type job struct {
		primitive string
		scenario  chaos.Scenario
	}
	var jobs []job
	for _, s := range scenarios {
		jobs = append(jobs, job{chaos.Mutex, s})
	}
	primitives, err := familyPrimitives(*family)
	if err != nil {
		return usageErr{err}
	}
	for _, p := range primitives {
		for _, n := range strings.Split(*familyScenarios, ",") {
			s, ok := chaos.Lookup(strings.TrimSpace(n))
			if !ok {
				return usageErr{fmt.Errorf("no scenario %q (have %s)", n, scenarioNames())}
			}
			jobs = append(jobs, job{p, s})
		}
	}
	var results []*chaos.Result
	for _, j := range jobs {
		name := j.scenario.Name
		if j.primitive != chaos.Mutex {
			name = j.primitive + "/" + name
		}
		for _, fenced := range modes {
			if !*asJSON {
				fmt.Fprintf(out, "running %-26s fencing %-3s (%v)...\n", name, onOff(fenced), *duration)
			}
			r, err := chaos.Run(ctx, chaos.Config{Scenario: j.scenario, Fenced: fenced, Duration: *duration,
				TTL: *ttl, Workers: *workers, Backend: be, Primitive: j.primitive})
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			results = append(results, r)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	if *asJSON {
		if err := writeChaosJSON(out, results, *report); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out)
		chaos.WriteTable(out, results)
		chaos.WriteEvidence(out, results)
	}
	if *report != "" {
		f, err := os.Create(*report)
		if err != nil {
			return err
		}
		if err := chaos.WriteHTML(f, results); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if !*asJSON {
			fmt.Fprintf(out, "\nreport: %s\n", *report)
		}
	}
	failed := 0
	for _, r := range results {
		if !r.Verdict.OK {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d runs failed their verdict", failed, len(results))
	}
	return nil
}

func nodesUp(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("nodes up", flag.ContinueOnError)
	n := fs.Int("n", 5, "how many nodes")
	aof := fs.Bool("aof", true, "persist with appendfsync always, as fencing tokens need")
	asJSON := fs.Bool("json", false, `print {"nodes": [URL, ...]} instead of a comma-separated list`)
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	p := node.PersistNone
	if *aof {
		p = node.PersistAOFAlways
	}
	base, cleanup, err := guardedDir()
	if err != nil {
		return err
	}
	defer cleanup()
	g, err := node.StartProcesses(ctx, *n, node.Config{Persistence: p, BaseDir: base})
	if err != nil {
		return err
	}
	defer g.Close()
	urls := make([]string, len(g))
	for i, nd := range g {
		urls[i] = "redis://" + nd.Addr()
	}
	if *asJSON {
		if err := json.NewEncoder(out).Encode(map[string][]string{"nodes": urls}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out, strings.Join(urls, ","))
	}
	fmt.Fprintln(os.Stderr, "nodes are up; press Ctrl-C to stop them and delete their data")
	<-ctx.Done()
	return nil
}

// guardedDir creates the directory that holds the nodes' data, under a
// guardian (internal/procguard) that removes it if this process dies
// without its cleanup, SIGKILL included; the servers themselves die with
// it by their parent-death signal (package node, Linux). cleanup removes
// the directory and disarms the guardian.
func guardedDir() (dir string, cleanup func(), err error) {
	guard, err := procguard.Start(nil)
	if err != nil {
		return "", nil, err
	}
	dir = filepath.Join(os.TempDir(), "redlock-nodes-"+rand.Text())
	// Registered before it exists: the guardian removes it even if this
	// process dies right after the Mkdir.
	if err = guard.Remove(dir); err == nil {
		err = os.Mkdir(dir, 0o700)
	}
	if err != nil {
		guard.Close()
		return "", nil, err
	}
	return dir, func() {
		os.RemoveAll(dir)
		guard.Close()
	}, nil
}

// familyPrimitives reads -family: empty for none, all, or a list.
func familyPrimitives(flag string) ([]string, error) {
	switch flag {
	case "":
		return nil, nil
	case "all":
		return chaos.Primitives, nil
	}
	var out []string
	for _, p := range strings.Split(flag, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(chaos.Primitives, p) {
			return nil, fmt.Errorf("no lock family workload %q (have %s)", p, strings.Join(chaos.Primitives, ","))
		}
		out = append(out, p)
	}
	return out, nil
}

func scenarioNames() string {
	names := make([]string, len(chaos.Scenarios))
	for i, s := range chaos.Scenarios {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// chaosRunJSON is one run in `redlock chaos --json`.
type chaosRunJSON struct {
	Scenario   string             `json:"scenario"`
	Fencing    bool               `json:"fencing"`
	OK         bool               `json:"ok"`
	Verdict    string             `json:"verdict"`
	Holds      int                `json:"holds"`
	Faults     int                `json:"faults"`
	Acked      int                `json:"acked_writes"`
	Findings   map[string]int     `json:"findings"`
	Violations []chaos.Violation  `json:"violations,omitempty"`
	Porcupine  []chaos.ModelCheck `json:"porcupine"`
}

func writeChaosJSON(out io.Writer, results []*chaos.Result, report string) error {
	runs := make([]chaosRunJSON, 0, len(results))
	for _, r := range results {
		f := r.Findings
		runs = append(runs, chaosRunJSON{
			Scenario: r.Name(), Fencing: r.Config.Fenced, OK: r.Verdict.OK, Verdict: r.Verdict.Text,
			Holds: len(r.History.Holds), Faults: len(r.History.Faults), Acked: r.History.Acked,
			Findings: map[string]int{
				"overlaps": f.Overlaps, "lease_overlaps": f.LeaseOverlaps, "overruns": f.Overruns,
				"stale_rejected": f.StaleRejected, "stale_accepted": f.StaleAccepted, "duplicate_tokens": f.Duplicates,
				"token_order": f.TokenOrder, "lost_writes": f.LostWrites, "stale_reads": f.StaleReads,
				"over_permits": f.OverPermits,
			},
			Violations: f.Violations,
			Porcupine:  r.Models,
		})
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"runs": runs, "report": report})
}
