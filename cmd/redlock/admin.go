package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/quorumlock/redlock"
)

// runProvision gives every node its fencing id (redlock.Client.Provision).
// The first fenced lock on a fresh deployment does this too; an explicit
// step belongs in a deployment's setup, while every node is up.
func runProvision(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	prefix := fs.String("key-prefix", "redlock", "the clients' key prefix")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the nodes")
	asJSON := fs.Bool("json", false, "print the node ids as JSON")
	if err := fs.Parse(args); err != nil {
		return &exitError{2, err}
	}
	c, closeNodes, err := adminClient(*nodesFlag, *prefix, *timeout)
	if err != nil {
		return err
	}
	defer closeNodes()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := c.Provision(ctx); err != nil {
		return err
	}
	ids, err := c.NodeIDs(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"node_ids": ids})
	}
	for i, id := range ids {
		fmt.Fprintf(out, "node %d: fencing id %d\n", i, id)
	}
	return nil
}

var errNoNode = errors.New("--node is required")

// runRepair gives an amnesiac node back a fencing id, after raising its
// token counters above every token the other nodes know of
// (redlock.Client.Repair).
func runRepair(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("repair", flag.ContinueOnError)
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	prefix := fs.String("key-prefix", "redlock", "the clients' key prefix")
	idx := fs.Int("node", -1, "index in --nodes of the node to repair")
	timeout := fs.Duration("timeout", time.Minute, "how long the repair may take (it scans the other nodes)")
	if err := fs.Parse(args); err != nil {
		return &exitError{2, err}
	}
	if *idx < 0 {
		return &exitError{2, errNoNode}
	}
	c, closeNodes, err := adminClient(*nodesFlag, *prefix, 5*time.Second)
	if err != nil {
		return err
	}
	defer closeNodes()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := c.Repair(ctx, *idx); err != nil {
		return err
	}
	ids, err := c.NodeIDs(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "node %d repaired: fencing id %d\n", *idx, ids[*idx])
	return nil
}

// adminClient is a lock client for administration: generous timeouts, no
// locks taken.
func adminClient(nodes, prefix string, timeout time.Duration) (*redlock.Client, func(), error) {
	clients, err := dialNodes(nodes)
	if err != nil {
		return nil, nil, &exitError{2, err}
	}
	c, err := redlock.New(clients, redlock.WithKeyPrefix(prefix), redlock.WithNodeTimeout(timeout),
		redlock.WithTTL(3*timeout))
	if err != nil {
		closeAll(clients)
		return nil, nil, &exitError{2, err}
	}
	return c, func() {
		c.Close()
		closeAll(clients)
	}, nil
}
