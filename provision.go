package redlock

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/internal/identity"
)

// The public API of the deployment's identity: provisioning, reprovisioning
// and the node ids. The machinery is internal/identity's.

// Provision gives every node of a new deployment its fencing identity, and
// checks the identity of a deployment that has one. It is a deploy-time
// step (`redlock provision`, or a one-off program), not part of a
// service's start: locks need no call to it. Many clients may provision at
// once, and Provision may be called again later: it converges, and on a
// deployment that is already provisioned it changes nothing.
//
// A deployment not yet provisioned needs every node to answer: its roster
// names every member by the uuid the member claimed, and ids are the ranks
// in that roster, written only once every node holds it (docs/fencing.md,
// "Node identity"). A member that did not claim cannot be named, and
// adding it later would change every rank. A deployment already
// provisioned (a majority of its nodes holds one roster and ids) needs
// only a majority: Provision checks the nodes that answer, succeeds if they
// are the deployment's and intact, and logs (WithLogger) which nodes it
// could not check; ProvisionWithReport returns them. A node that was
// silent is checked by every client at its first reply (the node list
// check), and by `redlock doctor`.
//
// Before anything is written, it refuses a list that is not one
// deployment's masters with a *NodeListError (ErrWrongNodeList): a replica
// (it refuses writes, READONLY), or nodes of two deployments, which it
// names; and one server listed twice with ErrDuplicateNode.
// It returns an error matching ErrAmnesia when some nodes lost their
// identity in a provisioned deployment (Repair brings each back, and clients
// do so by themselves once a majority is intact), and ErrNodeIDConflict when
// the nodes disagree in a way no repair fixes alone. Once any node holds an
// id, it writes ids only to nodes that hold the deployment's roster: a
// deployment that lost a majority is never provisioned again (see
// Reprovision).
//
// Fenced acquisitions on a deployment nobody provisioned fail with
// ErrNotProvisioned. Without fencing (WithoutFencing) Provision does
// nothing.
func (c *Client) Provision(ctx context.Context) error {
	_, err := c.ProvisionWithReport(ctx)
	return err
}

// ProvisionReport is what a Provision that succeeded checked.
type ProvisionReport struct {
	// IDs holds each node's fencing id after Provision (read once more
	// at its end), -1 for a node that did not answer that read or was not
	// intact then. Nil without fencing.
	IDs []int
	// Unchecked are the nodes that did not answer (NodeResult.Err says
	// why): Provision could not check that they hold the deployment's
	// roster and an intact id. Empty when every node answered.
	Unchecked []NodeResult
}

// ProvisionWithReport is Provision, and says which nodes it checked.
func (c *Client) ProvisionWithReport(ctx context.Context) (*ProvisionReport, error) {
	r, err := c.ident.ProvisionWithReport(ctx)
	if err != nil {
		return nil, err
	}
	return &ProvisionReport{IDs: r.IDs, Unchecked: r.Unchecked}, nil
}

// Reprovision recovers a deployment in which a majority of the nodes lost
// their fencing state, an outage no repair can end: it raises every node's
// counter so that all later tokens exceed above, and gives the deployment
// a new roster and new ids. Every node must answer.
//
// A node that lost its data lost the lock keys it held, and a lock held on
// it may still be valid on its holder. So Reprovision first waits, as
// Repair does, until every node that is not intact has been out for the
// longest TTL in use, by the node's clock and by this client's own (the
// delayed restart; nothing skips it): the longest TTL the nodes that
// answer recorded, or this client's WithTTL if that is longer. Where the
// nodes that recorded a longer TTL lost that record with their data, only
// this client's TTL tells it: build the reprovisioning client with the
// longest TTL any client uses, For included. The wait ends at ctx: if ctx
// ends first, or its deadline comes before the wait would end, nothing is
// written and the error is a *RepairTooSoonError (ErrRepairTooSoon) saying
// how long is left. Each node's reset is then one script, conditional on
// what the read after the wait found there: a node that lost its data
// again since, or was repaired since, is left as it is, and Reprovision
// fails with ErrAmnesia naming it (the other nodes hold the new roster;
// repair or reprovision again).
//
// above must be below 2^52 (ErrTokenRange otherwise), so that the tokens
// after it have room below 2^53, and at least the highest token any
// protected store accepted (each fence keeps its highest: fence.Redis's
// mark, the PostgreSQL fence's table); tokens from before the loss that
// were never seen by a store give no guarantee.
//
// What a lock held across a Reprovision keeps: its keys on the nodes that
// did not lose them (Reprovision touches no lock key), so no other client
// is granted it within its validity, whether its majority lost its data
// or not (the delay outlasts every lock the lost keys belonged to). Its
// holder's Extend and Unlock may fail until its client has re-checked the
// node list against the new roster: the lock then runs out at its
// validity. Its token stays below every token granted after.
func (c *Client) Reprovision(ctx context.Context, above uint64) error {
	return c.ident.Reprovision(ctx, above)
}

// NodeIDs returns each node's fencing id, -1 for a node whose fencing state
// is not intact (not provisioned, emptied, restarted or promoted) or that
// did not answer. It fails with a *NodeListError if the client's node list
// is not the deployment's, as far as the nodes that answered show. If a
// node did not answer, it returns the ids it read with a *QuorumError of
// Kind ErrUnavailable that names each node's outcome: every node must
// answer for the ids to be complete.
func (c *Client) NodeIDs(ctx context.Context) ([]int, error) {
	return c.ident.NodeIDs(ctx)
}

// NodeListError says why a client's node list is not the deployment's.
// It matches ErrWrongNodeList.
type NodeListError = identity.NodeListError

// The public API of repair (docs/fencing.md, "Repair"): the machinery, and
// the clients' online repair, are internal/identity's.

// RepairTooSoonError is returned by Repair while the node has not been out
// for the longest TTL in use: it may have lost lock keys that other clients
// still hold, so it must not count before those locks have expired (the
// delayed restart of the RedLock spec).
type RepairTooSoonError = identity.RepairTooSoonError

// A RepairOption changes how Repair proceeds.
type RepairOption func(*repairConfig)

// repairConfig is what the RepairOptions set (internal/identity runs the
// repair by it).
type repairConfig = identity.RepairConfig

// RepairWithoutDelay repairs at once, without waiting out the delayed
// restart. Use it only when no lock can be held on the node: a node that was
// never used, or a deployment whose clients are all stopped for at least the
// longest TTL.
func RepairWithoutDelay() RepairOption { return func(r *repairConfig) { r.Now = true } }

// RepairAdopting lets Repair give a node that holds no member of the
// deployment's roster (emptied, or a new server) the one member no node
// holds: the operator vouches that the node stands for that member, and that
// the server which held it will never serve again. Without it, Repair
// gives a node back only the member this client saw it hold: a list with a
// stranger in a member's place must not graft the stranger in
// (docs/operations.md, "Replacing a node").
func RepairAdopting() RepairOption { return func(r *repairConfig) { r.Adopt = true } }

// Repair brings node i back after its fencing state stopped being intact: it
// lost its data, or it serves under a new replication id (restarted, or a
// replica promoted in a failover). It
//
//  1. waits out the delayed restart: until the node has been out for the
//     longest TTL in use (the longest any acquisition recorded on a
//     majority), it returns a *RepairTooSoonError saying how long to wait.
//     "Out" runs from the node's lost stamp, written by the first script
//     that found it not intact, and must have lasted that long both by the
//     node's clock and by this client's own, since this client first saw
//     that stamp: a client that has just started, such as `redlock repair`,
//     waits a full longest TTL whatever the node says;
//  2. reads the counter G of a majority of intact nodes, in a read that
//     begins after the delay;
//  3. in one script on node i, only if the node still holds the stamp it
//     read (a wipe or another repair since makes it fail, and nothing is
//     written): raises its G above them, sets the repair floor E to that
//     value for the retention, and restores its identity.
//
// A node that lost its uuid takes back the one uuid of the roster that no
// node holds; every node must then answer, so that uuid is known to be
// free. Repair is safe to run from several clients at once. A node that is
// intact is left as it is. Clients repair nodes by themselves (online),
// once a majority is intact and the delay has passed. A nil RepairOption
// is refused with ErrNilOption, before anything is sent.
func (c *Client) Repair(ctx context.Context, i int, opts ...RepairOption) error {
	if i < 0 || i >= len(c.nodes) {
		return fmt.Errorf("redlock: repair: no node %d", i)
	}
	if !c.cfg.fencing {
		return nil
	}
	var rc repairConfig
	for j, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: opts[%d]", ErrNilOption, j)
		}
		o(&rc)
	}
	return c.ident.Repair(ctx, i, rc)
}
