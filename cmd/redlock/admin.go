package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
)

const provisionUsage = `usage: redlock provision [flags]

Gives every node of a new deployment its fencing identity. Every node must answer. Run it once at
deploy time: fenced locks on a deployment nobody provisioned fail (redlock exec exits 69). Running it
again changes nothing.

--reprovision-above T recovers a deployment in which a majority of the nodes lost their fencing
state (docs/operations.md, "A majority lost"): every node forgets its identity, every counter is
raised so that all later tokens exceed T, and the deployment is provisioned afresh. T must be at least
the highest token any protected store accepted (the fences' marks); it is never guessed.

Flags:
`

// runProvision gives every node its fencing identity
// (redlock.Client.Provision), or with --reprovision-above recovers a
// deployment that lost a majority (redlock.Client.Reprovision).
func runProvision(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), provisionUsage); fs.PrintDefaults() }
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	prefix := fs.String("key-prefix", "redlock", "the clients' key prefix")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the nodes")
	asJSON := fs.Bool("json", false, "print the node ids as JSON")
	var above *uint64
	fs.Func("reprovision-above", "after a majority lost its data, reprovision so that every later token exceeds `T`: "+
		"at least the highest token any store accepted (no default)", func(s string) error {
		t, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("not a token: %q", s)
		}
		above = &t
		return nil
	})
	if err := parseFlags(fs, args, out); err != nil {
		return err
	}
	c, closeNodes, err := adminClient(*nodesFlag, *prefix, *timeout)
	if err != nil {
		return err
	}
	defer closeNodes()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if above != nil {
		err = c.Reprovision(ctx, *above)
	} else {
		err = c.Provision(ctx)
	}
	if errors.Is(err, redlock.ErrAmnesia) {
		return fmt.Errorf("%w\n(a minority not intact: `redlock repair --node I`, or wait for the clients' online repair; "+
			"a majority lost: `redlock provision --reprovision-above T`, docs/operations.md \"A majority lost\")", err)
	}
	if err != nil {
		return err
	}
	ids, err := c.NodeIDs(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"node_ids": ids})
	}
	if above != nil {
		fmt.Fprintf(out, "reprovisioned: every later token exceeds %d\n", *above)
	}
	for i, id := range ids {
		fmt.Fprintf(out, "node %d: fencing id %d\n", i, id)
	}
	return nil
}

var errNoNode = errors.New("--node is required")

const repairUsage = `usage: redlock repair --node I [flags]

Brings back node I after its fencing state stopped being intact: it lost its data, or it serves under
a new replication id (it was restarted, or a replica was promoted). The repair raises the node's
counter above those of a majority of intact nodes, so tokens stay unique and ordered.

The node may have lost lock keys that clients still hold, so the repair waits out the delayed restart:
until the node has been out for the longest TTL in use, by the node's clock since it was first found
out and by this command's own since it first saw it so, it refuses, says how long to wait, and exits
75. A new run starts its own wait over, so use --wait, which waits that long and repairs. Clients also
repair such a node by themselves once the delay has passed and a majority of the nodes is intact.

A node that holds no identity at all (emptied) gets back the member of the roster that no node holds
only with --adopt: nothing on it tells a member that lost its data from a stranger listed in a member's
place. Use --adopt only if the node stands for that member, and the server that held it will never
serve again (docs/operations.md, "Replacing a node").

--now skips the wait. Use it only when no lock can be held on the node: a node that was never used,
or a deployment whose clients have all been stopped for at least the longest TTL. Otherwise two
clients can hold one lock at once.

Exit codes: 0 repaired (or already intact); 75 too soon (without --wait); 69 no majority of intact
nodes answered; 2 bad flags; 1 anything else.

Flags:
`

// runRepair brings back a node whose fencing state is not intact
// (redlock.Client.Repair).
func runRepair(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("repair", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), repairUsage); fs.PrintDefaults() }
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	prefix := fs.String("key-prefix", "redlock", "the clients' key prefix")
	idx := fs.Int("node", -1, "index in --nodes of the node to repair")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one repair attempt may wait for the nodes")
	now := fs.Bool("now", false, "repair without waiting out the delayed restart: only for a node on which no lock can be held")
	wait := fs.Bool("wait", false, "if it is too soon, wait as long as the repair says, then repair")
	adopt := fs.Bool("adopt", false, "give an emptied node the roster's member that no node holds (see above)")
	if err := parseFlags(fs, args, out); err != nil {
		return err
	}
	if *idx < 0 {
		return &exitError{2, errNoNode}
	}
	if n := len(strings.Split(*nodesFlag, ",")); *idx >= n {
		return &exitError{2, fmt.Errorf("--node %d: --nodes lists %d nodes, indexed from 0", *idx, n)}
	}
	if *now && *wait {
		return &exitError{2, errors.New("--now and --wait exclude each other")}
	}
	c, closeNodes, err := adminClient(*nodesFlag, *prefix, 5*time.Second)
	if err != nil {
		return err
	}
	defer closeNodes()
	var opts []redlock.RepairOption
	if *now {
		opts = append(opts, redlock.RepairWithoutDelay())
	}
	if *adopt {
		opts = append(opts, redlock.RepairAdopting())
	}
	attempt := func() error {
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return c.Repair(ctx, *idx, opts...)
	}
	err = attempt()
	var soon *redlock.RepairTooSoonError
	if errors.As(err, &soon) && *wait {
		err = waitAndRepair(ctx, out, soon, attempt)
	}
	if errors.As(err, &soon) {
		return &exitError{75, fmt.Errorf("node %d has been out for less than the longest TTL in use: it may have lost "+
			"lock keys that clients still hold. Run again with --wait (it waits %v; a new run without it starts its "+
			"wait over); clients also repair it by themselves once that has passed. (%w)", *idx, roundWait(soon.Wait), err)}
	}
	if errors.Is(err, redlock.ErrUnavailable) {
		return &exitError{69, fmt.Errorf("%w\n(bring the other nodes up; if a majority of them is not intact, no repair "+
			"can help: docs/operations.md, \"A majority lost\")", err)}
	}
	if err != nil {
		return err
	}
	ids, err := c.NodeIDs(ctx)
	if err != nil || ids[*idx] < 0 {
		// Repaired, but not every node answers now (NodeIDs needs them all).
		fmt.Fprintf(out, "node %d repaired\n", *idx)
		return nil
	}
	fmt.Fprintf(out, "node %d repaired: fencing id %d\n", *idx, ids[*idx])
	return nil
}

// waitAndRepair waits out the delay the first attempt reported and tries
// again, while the node says it is still too soon, for at most that delay
// plus a margin: a node whose delay does not run down (no client has
// stamped when it went out) is reported rather than waited on for ever.
func waitAndRepair(ctx context.Context, out io.Writer, soon *redlock.RepairTooSoonError, attempt func() error) error {
	first := soon.Wait
	deadline := time.Now().Add(first + max(time.Second, first/10))
	var err error = soon
	for try := 0; try < 10 && errors.As(err, &soon); try++ {
		pause := soon.Wait + 50*time.Millisecond
		if try > 0 && time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("still too soon after waiting %v, the delay the node first reported: %w", roundWait(first), err)
		}
		fmt.Fprintf(out, "node %d: waiting %v for the delayed restart (the node may have lost lock keys that "+
			"clients still hold)\n", soon.Node, roundWait(pause))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		err = attempt()
	}
	return err
}

func roundWait(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
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
