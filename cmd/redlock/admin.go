package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
)

const provisionUsage = `usage: redlock provision [flags]

Gives every node of a new deployment its fencing identity. Run it once at deploy time, with every
node up: fenced locks on a deployment nobody provisioned fail (redlock exec exits 69), and a new
deployment's roster names every member. Running it again changes nothing: on a deployment already
provisioned it checks the nodes that answer and needs only a majority of them; it lists the nodes
it could not check, which each client checks at its first reply (and redlock doctor, once they are
back).

It refuses, before writing anything, a list that is not one deployment's masters: a replica, nodes
of two deployments (it says which nodes belong to which), one server listed twice. Fix the list;
no repair or reprovision fixes one.

--reprovision-above T recovers a deployment in which a majority of the nodes lost their fencing
state (docs/operations.md, "A majority lost"): it first waits until every node that lost its data
has been out for the longest TTL in use (--longest-ttl, or longer if the nodes recorded longer), so
that no lock those nodes held can be taken again within its validity; then every counter is raised
so that all later tokens exceed T, and the deployment gets a new roster. T must be at least
the highest token any protected store accepted (the fences' marks); it is never guessed. On a
deployment whose majority is intact, or over a list that is not one deployment's, it refuses unless
--force is given: a repair brings back a minority (redlock repair), and a wrong list is fixed, not
reprovisioned.

Exit codes: 0 provisioned (or checked); 2 bad flags, or --reprovision-above refused without --force;
75 --reprovision-above could not wait out the delayed restart within --max-wait (nothing written);
1 anything else.

Flags:
`

// runProvision gives every node its fencing identity
// (redlock.Client.ProvisionWithReport), or with --reprovision-above
// recovers a deployment that lost a majority (redlock.Client.Reprovision).
func runProvision(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), provisionUsage); fs.PrintDefaults() }
	nodesFlag, prefix := nodeFlags(fs)
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for each node at each step (the command "+
		"takes at most provisionSteps times that)")
	asJSON := fs.Bool("json", false, "print the node ids as JSON")
	force := fs.Bool("force", false, "with --reprovision-above: reprovision although a majority of the nodes is intact "+
		"or the list is not one deployment's")
	longest := fs.Duration("longest-ttl", redlock.DefaultTTL, "with --reprovision-above: the longest TTL any client "+
		"uses (For included); the nodes that lost their data are kept out that long first")
	maxWait := fs.Duration("max-wait", 5*time.Minute, "with --reprovision-above: how long to wait at most for "+
		"that delay (it starts when a node is first found without its data)")
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
	if *force && above == nil {
		return &exitError{2, errors.New("--force goes with --reprovision-above")}
	}
	ttl, wait := 3**timeout, time.Duration(0)
	if above != nil {
		// Reprovision waits out the delayed restart, of the longest TTL
		// the nodes recorded or this client's, whichever is longer.
		ttl, wait = max(ttl, *longest), *maxWait
	}
	c, closeNodes, err := adminClient(*nodesFlag, *prefix, *timeout, ttl)
	if err != nil {
		return err
	}
	defer closeNodes()
	// A node that does not answer costs the node timeout at each step.
	ctx, cancel := context.WithTimeout(ctx, provisionSteps**timeout+wait)
	defer cancel()
	var rep *redlock.ProvisionReport
	if above != nil {
		if !*force {
			if err := reprovisionNeeded(ctx, c); err != nil {
				return err
			}
		}
		err = c.Reprovision(ctx, *above)
		if err == nil {
			rep, err = c.ProvisionWithReport(ctx)
		}
	} else {
		rep, err = c.ProvisionWithReport(ctx)
	}
	if errors.Is(err, redlock.ErrRepairTooSoon) {
		return &exitError{75, fmt.Errorf("%w\n(the nodes that lost their data must stay out for the longest TTL in use "+
			"before the deployment is reprovisioned; raise --max-wait, or run again: nothing was written)", err)}
	}
	if errors.Is(err, redlock.ErrAmnesia) {
		return &exitError{69, fmt.Errorf("%w\n(a minority not intact: `redlock repair --node I`, or wait for the clients' online repair; "+
			"a majority lost: `redlock provision --reprovision-above T`, docs/operations.md \"A majority lost\")", err)}
	}
	if err != nil {
		return provisionError(err)
	}
	if *asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"node_ids": rep.IDs, "unchecked": uncheckedNodes(rep)})
	}
	if above != nil {
		fmt.Fprintf(out, "reprovisioned: every later token exceeds %d\n", *above)
	}
	unchecked := map[int]error{}
	for _, r := range rep.Unchecked {
		unchecked[r.Node] = r.Err
	}
	for i, id := range rep.IDs {
		if cause, ok := unchecked[i]; ok {
			fmt.Fprintf(out, "node %d: not checked: it did not answer (%v); clients check it at their first reply, "+
				"and so does redlock doctor once it is back\n", i, cause)
			continue
		}
		fmt.Fprintf(out, "node %d: fencing id %d\n", i, id)
	}
	return nil
}

// provisionSteps bounds the rounds a provision waits for the nodes in:
// reading them, claiming, recording the roster, writing ids, the clients'
// node list check, and the read for the report (a reprovision adds its
// own reset and reads).
const provisionSteps = 8

func uncheckedNodes(rep *redlock.ProvisionReport) []int {
	nodes := []int{}
	for _, r := range rep.Unchecked {
		nodes = append(nodes, r.Node)
	}
	return nodes
}

// reprovisionNeeded refuses a reprovision that is not a recovery: a
// majority of the nodes is intact (repair brings back the others, and
// reprovisioning would forget every identity for nothing), or the list is
// not one deployment's (reprovisioning would take nodes from their own).
// A deployment whose nodes cannot all be read is left to Reprovision, which
// needs every node.
func reprovisionNeeded(ctx context.Context, c *redlock.Client) error {
	ids, err := c.NodeIDs(ctx)
	var wrong *redlock.NodeListError
	if errors.As(err, &wrong) {
		return &exitError{2, fmt.Errorf("refusing to reprovision: %w. Fix the node list; --force reprovisions "+
			"every listed node anyway, taking nodes from their deployments", err)}
	}
	if err != nil {
		return nil
	}
	intact := 0
	for _, id := range ids {
		if id >= 0 {
			intact++
		}
	}
	if intact >= len(ids)/2+1 {
		return &exitError{2, fmt.Errorf("refusing to reprovision: %d of %d nodes are intact (fencing ids %v), a "+
			"majority: there is no loss to recover from. Nodes not intact come back with `redlock repair --node I` "+
			"(docs/operations.md); --force reprovisions anyway", intact, len(ids), ids)}
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
	nodesFlag, prefix := nodeFlags(fs)
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
	c, closeNodes, err := adminClient(*nodesFlag, *prefix, 5*time.Second, 15*time.Second)
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
	if errors.Is(err, redlock.ErrWrongNodeList) {
		return provisionError(err) // 78, as exec and provision
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
func adminClient(nodes, prefix string, timeout, ttl time.Duration) (*redlock.Client, func(), error) {
	clients, err := dialNodes(nodes)
	if err != nil {
		return nil, nil, &exitError{2, err}
	}
	c, err := redlock.New(clients, redlock.WithKeyPrefix(prefix), redlock.WithNodeTimeout(timeout),
		redlock.WithTTL(ttl))
	if err != nil {
		closeAll(clients)
		return nil, nil, &exitError{2, err}
	}
	return c, func() {
		c.Close()
		closeAll(clients)
	}, nil
}

// provisionError gives a failed provision the exit codes exec gives the
// same causes (docs/operations.md, "Exit codes"): 78 for a node list that
// is not the deployment's, 69 for nodes that cannot be used, 1 otherwise.
func provisionError(err error) error {
	switch {
	case errors.Is(err, redlock.ErrWrongNodeList):
		return &exitError{78, fmt.Errorf("%w\n(--nodes must list each node of the deployment, once, as it was "+
			"provisioned; a node of another deployment, or a list in another order, is refused)", err)}
	case errors.Is(err, redlock.ErrUnavailable), errors.Is(err, redlock.ErrAuth),
		errors.Is(err, redlock.ErrNoPermission), errors.Is(err, redlock.ErrFencingNode):
		return &exitError{69, err}
	}
	return err
}
