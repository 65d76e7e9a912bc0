package identity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// maxReprovisionAbove bounds Reprovision's above: tokens stay below 2^53,
// and a deployment reprovisioned just below this bound still has 2^44
// acquisitions (about 17 trillion) before they would reach it.
const maxReprovisionAbove = 1 << 52

// reprovisionWaits bounds how many times Reprovision waits out a delay: a
// node that keeps losing its data starts its delay again each time.
const reprovisionWaits = 3

// Reprovision recovers a deployment in which a majority of the nodes lost
// their fencing state (the root package's Reprovision documents how).
//
// A node that lost its data lost the lock keys it held, and the locks
// they were part of may still be valid: like Repair, Reprovision waits
// until every node that is not intact has been out for the longest TTL in
// use (restartDelay: by the node's clock and by this client's), then, in
// one script per node conditional on what it read after that wait
// (reset.lua), raises the node's counter above above and gives it its new
// identity. A node that changed since the read is left as it is, and
// Reprovision fails naming it.
func (d *Deployment) Reprovision(ctx context.Context, above uint64) error {
	if !d.cfg.Fencing {
		return nil
	}
	if above >= maxReprovisionAbove {
		return fmt.Errorf("%w: %d leaves too few tokens below 2^53; above must be below 2^52 (4503599627370496)",
			kind.ErrTokenRange, above)
	}
	states, longest, err := d.waitOutLosses(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := d.adminContext(ctx)
	defer cancel()
	uuids := make([]string, len(d.nodes))
	for i := range uuids {
		uuids[i] = uuid.NewString()
	}
	members := slices.Sorted(slices.Values(uuids))
	roster := strings.Join(members, ",")
	k := &d.keys
	floor := int64(above/256) + 1
	changed := make([]bool, len(d.nodes))
	t, err := d.onNodes(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		s := states[i]
		n, err := nodescript.Reset.Run(ctx, node,
			[]string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.Floor, k.MaxTTL},
			floor, d.cfg.Retention, s.uuid, s.rawID, s.rawStamp,
			uuids[i], roster, slices.Index(members, uuids[i]), longest.Milliseconds(), intactArg(s)).Int()
		changed[i] = err == nil && n != 1
		return outcomeOf(err)
	})
	if err != nil {
		return err
	}
	if t.Granted() < len(d.nodes) {
		return d.quorumError(&verdict.Failure{Op: "reprovision", Kind: kind.ErrUnavailable, Nodes: t.Snapshot()})
	}
	if i := slices.Index(changed, true); i >= 0 {
		return fmt.Errorf("%w: node %d changed while it was reprovisioned (it lost its data again, or was "+
			"repaired): it was left as it was; the other nodes hold the new roster, and run Reprovision again "+
			"if a majority does not", errStampChanged, i)
	}
	for i := range d.nodes {
		d.amnesiac[i].Store(false)
	}
	d.knownMu.Lock()
	copy(d.known, uuids)
	d.knownMu.Unlock()
	d.log.Warn("redlock: deployment reprovisioned", "tokens above", above, "waited for", longest)
	d.refreshList(ctx)
	return nil
}

// waitOutLosses reads every node until, at a read that began after the
// wait, every node that is not intact has been out for the longest TTL in
// use, and returns that read and the TTL. It waits on ctx, and says why
// it could not wait long enough.
func (d *Deployment) waitOutLosses(ctx context.Context) ([]*nodeState, time.Duration, error) {
	for waits := 0; ; waits++ {
		begun := d.cfg.Clock.Now()
		actx, cancel := d.adminContext(ctx)
		states, err := d.readAllStates(actx, "reprovision")
		cancel()
		if err != nil {
			return nil, 0, err
		}
		// Every granted acquisition recorded its TTL on a majority; with
		// a majority lost that record may be gone, so this client's own TTL
		// counts too.
		longest := d.cfg.TTL
		for _, s := range states {
			longest = max(longest, s.maxTTL)
		}
		wait, node := time.Duration(0), -1
		for i, s := range states {
			if s.intact() {
				continue
			}
			if s.stamp == "" {
				return nil, 0, fmt.Errorf("%w: node %d is not intact and holds no lost stamp to wait out "+
					"(read-only? role %s)", kind.ErrAmnesia, i, s.role)
			}
			if w := d.restartDelay(i, s, begun, longest); w > wait {
				wait, node = w, i
			}
		}
		if wait == 0 {
			return states, longest, nil
		}
		tooSoon := &RepairTooSoonError{Node: node, Wait: wait}
		if waits == reprovisionWaits {
			return nil, 0, tooSoon
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, 0, fmt.Errorf("%w (the caller's deadline comes first)", tooSoon)
		}
		d.log.Warn("redlock: reprovision waits out the delayed restart of the nodes that lost their data",
			"node", node, "wait", wait, "longest TTL", longest)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, 0, fmt.Errorf("%w: %w", tooSoon, context.Cause(ctx))
		}
	}
}

// intactArg tells reset.lua how the node was read: intact ("1"), so it must
// still serve under its recorded replication id, or stamped ("0"), so its
// stamp must be of the replication id it serves under.
func intactArg(s *nodeState) string {
	if s.intact() {
		return "1"
	}
	return "0"
}
