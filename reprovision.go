package redlock

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// maxReprovisionAbove bounds Reprovision's above: tokens stay below 2^53,
// and a deployment reprovisioned just below this bound still has 2^44
// acquisitions (about 17 trillion) before they would reach it.
const maxReprovisionAbove = 1 << 52

// Reprovision recovers a deployment in which a majority of the nodes lost
// their fencing state, an outage no repair can end: it forgets every node's
// identity, raises every node's counter so that all later tokens exceed
// above, and provisions the deployment afresh. Every node must answer.
//
// above must be below 2^52 (ErrTokenRange otherwise), so that the tokens
// after it have room below 2^53, and at least the highest token any protected store accepted
// (each fence keeps its highest: fence.Redis's mark, the PostgreSQL fence's
// table); tokens from before the loss that were never seen by a store give
// no guarantee. Locks held across a Reprovision are not affected, but stop
// clients first where the stores cannot be read.
func (c *Client) Reprovision(ctx context.Context, above uint64) error {
	if !c.cfg.fencing {
		return nil
	}
	if above >= maxReprovisionAbove {
		return fmt.Errorf("%w: %d leaves too few tokens below 2^53; above must be below 2^52 (4503599627370496)",
			ErrTokenRange, above)
	}
	ctx, cancel := c.adminContext(ctx)
	defer cancel()
	if _, err := c.readAllStates(ctx, "reprovision"); err != nil {
		return err
	}
	k := &c.keys
	floor := int64(above/256) + 1
	t, err := c.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		return outcomeOf(nodescript.Reset.Run(ctx, node, []string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.Floor},
			floor, c.args.retention).Err())
	})
	if err != nil {
		return err
	}
	if t.Granted() < len(c.nodes) {
		return &QuorumError{Op: "reprovision", Kind: ErrUnavailable, Nodes: t.Snapshot()}
	}
	c.log.Warn("redlock: deployment reprovisioned", "tokens above", above)
	return c.Provision(ctx)
}
