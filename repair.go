package redlock

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/internal/identity"
)

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
