package identity

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// maxReprovisionAbove bounds Reprovision's above: tokens stay below 2^53,
// and a deployment reprovisioned just below this bound still has 2^44
// acquisitions (about 17 trillion) before they would reach it.
const maxReprovisionAbove = 1 << 52

// Reprovision recovers a deployment in which a majority of the nodes lost
// their fencing state (the root package's Reprovision documents how): it
// forgets every node's identity, raises every node's counter so that all
// later tokens exceed above, and provisions the deployment afresh.
func (d *Deployment) Reprovision(ctx context.Context, above uint64) error {
	if !d.cfg.Fencing {
		return nil
	}
	if above >= maxReprovisionAbove {
		return fmt.Errorf("%w: %d leaves too few tokens below 2^53; above must be below 2^52 (4503599627370496)",
			kind.ErrTokenRange, above)
	}
	ctx, cancel := d.adminContext(ctx)
	defer cancel()
	if _, err := d.readAllStates(ctx, "reprovision"); err != nil {
		return err
	}
	k := &d.keys
	floor := int64(above/256) + 1
	t, err := d.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		return outcomeOf(nodescript.Reset.Run(ctx, node, []string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.Floor},
			floor, d.cfg.Retention).Err())
	})
	if err != nil {
		return err
	}
	if t.Granted() < len(d.nodes) {
		return d.quorumError(&lease.Failure{Op: "reprovision", Kind: kind.ErrUnavailable, Nodes: t.Snapshot()})
	}
	d.log.Warn("redlock: deployment reprovisioned", "tokens above", above)
	_, err = d.ProvisionWithReport(ctx)
	return err
}
