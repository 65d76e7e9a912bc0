package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// A status is how one check came out. Only failures make doctor exit
// non-zero; warnings are things an operator should know and may accept.
type status string

const (
	statusOK   status = "ok"
	statusWarn status = "warn"
	statusFail status = "fail"
)

// finding is one check's result, for one node or for the deployment.
type finding struct {
	Node   *int   `json:"node,omitempty"` // index in --nodes; absent for the deployment
	Addr   string `json:"addr,omitempty"`
	Check  string `json:"check"`
	Status status `json:"status"`
	Detail string `json:"detail"`
}

type doctorReport struct {
	Nodes       []nodeFacts `json:"nodes"`
	Findings    []finding   `json:"findings"`
	Verdict     status      `json:"verdict"`
	Failures    int         `json:"failures"`
	Warnings    int         `json:"warnings"`
	Fencing     bool        `json:"fencing"`
	NodeTimeout string      `json:"node_timeout"`
}

// runDoctor is the preflight check of a deployment:
//
//	redlock doctor --nodes redis://h1:6379,... [--node-timeout 50ms] [--fencing=true] [--scan-time 2s] [--json]
func runDoctor(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	nodeTimeout := fs.Duration("node-timeout", redlock.DefaultNodeTimeout, "the per-node timeout the clients use")
	fencing := fs.Bool("fencing", true, "the clients use fencing tokens (check persistence and node ids)")
	prefix := fs.String("key-prefix", "redlock", "the clients' key prefix (where the node-id markers live)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for each node")
	scanTime := fs.Duration("scan-time", 2*time.Second, "how long to count each node's fenced keys (SCAN); "+
		"past it the count is a lower bound")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args, out); err != nil {
		return err
	}
	clients, err := dialNodes(*nodesFlag)
	if err != nil {
		return &exitError{2, err}
	}
	defer closeAll(clients)

	rep := diagnose(ctx, clients, doctorConfig{*nodeTimeout, *fencing, *prefix, *timeout, *scanTime})
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writeDoctor(out, rep)
	}
	if rep.Verdict == statusFail {
		return &exitError{1, fmt.Errorf("doctor: %d check(s) failed", rep.Failures)}
	}
	return nil
}

func closeAll(clients []redis.UniversalClient) {
	for _, c := range clients {
		c.Close()
	}
}

// doctorConfig is what the checks depend on: the clients' settings, and
// how long doctor may wait.
type doctorConfig struct {
	nodeTimeout time.Duration
	fencing     bool
	prefix      string
	timeout     time.Duration // per node
	scanTime    time.Duration // per node, counting fenced keys
}

// diagnose gathers facts from every node at once, then judges them.
func diagnose(ctx context.Context, clients []redis.UniversalClient, cfg doctorConfig) *doctorReport {
	facts := make([]nodeFacts, len(clients))
	var g errgroup.Group
	for i, c := range clients {
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(ctx, cfg.timeout+cfg.scanTime)
			defer cancel()
			facts[i] = inspectNode(cctx, i, c)
			if cfg.fencing && facts[i].Reachable && facts[i].Error == "" {
				facts[i].Fencing = readFencing(cctx, c, cfg.prefix, cfg.scanTime)
			}
			return nil
		})
	}
	_ = g.Wait()
	rep := &doctorReport{Nodes: facts, Fencing: cfg.fencing, NodeTimeout: cfg.nodeTimeout.String()}
	var idErr error
	if cfg.fencing {
		idErr = readNodeIDs(ctx, clients, facts, cfg.prefix, cfg.timeout)
	}
	judge(rep, cfg, idErr)
	// Each node's findings together, in node order, then the deployment's.
	slices.SortStableFunc(rep.Findings, func(a, b finding) int {
		switch {
		case a.Node == nil && b.Node == nil:
			return 0
		case a.Node == nil:
			return 1
		case b.Node == nil:
			return -1
		}
		return *a.Node - *b.Node
	})
	rep.Verdict = statusOK
	for _, f := range rep.Findings {
		switch f.Status {
		case statusFail:
			rep.Failures++
			rep.Verdict = statusFail
		case statusWarn:
			rep.Warnings++
			if rep.Verdict == statusOK {
				rep.Verdict = statusWarn
			}
		}
	}
	return rep
}

func writeDoctor(out io.Writer, rep *doctorReport) {
	fenced := "on"
	if !rep.Fencing {
		fenced = "off"
	}
	fmt.Fprintf(out, "redlock doctor: %d nodes, fencing %s, node timeout %s\n\n", len(rep.Nodes), fenced, rep.NodeTimeout)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCHECK\tSTATUS\tDETAIL")
	for _, f := range rep.Findings {
		where := "deployment"
		if f.Node != nil {
			where = fmt.Sprintf("%d %s", *f.Node, f.Addr)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", where, f.Check, strings.ToUpper(string(f.Status)), f.Detail)
	}
	tw.Flush()
	fmt.Fprintf(out, "\nverdict: %s (%d failed, %d warnings)\n", strings.ToUpper(string(rep.Verdict)), rep.Failures, rep.Warnings)
}
