package redlock

import (
	_ "embed"
)

// Fencing tokens, minted by the quorum (docs/fencing.md).
//
// Every fenced acquisition returns a token that only grows: round 1 rides on
// the acquisition itself (each node proposes a candidate c*256 + id from its
// counter G, above the highest token it holds for the name), round 2
// commits the largest candidate on a majority, raising the name's H and
// every committing node's G, and aborts if a node reports a higher token.
// The validity is computed after round 2.
//
// Per lock name a node keeps only H, which expires a retention R after its
// last commit: G, one counter per node, carries the order across names and
// across H's expiry. Tokens are below 2^53, so they are exact in JSON
// numbers and Lua doubles.

// MaxFencingNodes is the most nodes a fenced client can use: a node id is
// the low byte of every token.
const MaxFencingNodes = 256

// deployment is what the lease engine tells the client of the nodes'
// identities as their replies come in (lease.Deployment).
type deployment struct{ c *Client }

func (d deployment) Recheck()       { d.c.checkList(false) }
func (d deployment) Amnesiac(i int) { d.c.noteAmnesia(i) }
func (d deployment) Intact(i int)   { d.c.noteIntact(i) }

// noteAmnesia warns, once per episode, that node i lost its fencing state,
// and starts repairing it online (repair.go).
func (c *Client) noteAmnesia(i int) {
	if c.amnesiac[i].CompareAndSwap(false, true) {
		c.log.Warn("redlock: node's fencing state is not intact (it lost its data, was restarted or "+
			"promoted, or was never provisioned); it is left out of quorums until repaired", "node", i)
	}
	c.repairOnline(i)
}

// noteIntact re-arms the warning once node i answers as intact again.
func (c *Client) noteIntact(i int) {
	if c.amnesiac[i].Load() {
		c.amnesiac[i].Store(false)
	}
}
