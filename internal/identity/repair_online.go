package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// errNotAdoptable ends a repair of a node that holds no member of the
// roster when this client never saw which member the node held: only an
// operator's Repair with RepairAdopting may pick one then.
var errNotAdoptable = fmt.Errorf("%w: the node holds no member of the deployment's roster, and this client never "+
	"saw it hold one: it lost all its data, or it is not the deployment's node. If it stands for the one member "+
	"no node holds, and the server that held it will never serve again, repair it with RepairAdopting "+
	"(`redlock repair --adopt`); otherwise fix the node list", kind.ErrAmnesia)

// remember records the uuid each intact node holds (at every check of the
// node list, and at every repair's read): what an online repair may give
// back to a node that lost its data.
func (d *Deployment) remember(states []*nodeState) {
	d.knownMu.Lock()
	defer d.knownMu.Unlock()
	for i, s := range states {
		if s != nil && s.intact() {
			d.known[i] = s.uuid
		}
	}
}

func (d *Deployment) knownUUID(i int) string {
	d.knownMu.Lock()
	defer d.knownMu.Unlock()
	return d.known[i]
}

// repairOnline repairs node i in the background, once per episode: it waits
// out the delayed restart and retries while no majority is intact, for at
// most a bounded number of tries, and stops at Close.
func (d *Deployment) repairOnline(i int) {
	if !d.repairing[i].CompareAndSwap(false, true) {
		return
	}
	started := d.rounds.Go(func() {
		defer d.repairing[i].Store(false)
		pause := max(d.cfg.TTL/10, d.cfg.NodeTimeout)
		for try := 0; try < onlineRepairTries; try++ {
			ctx, cancel := context.WithTimeout(d.rounds.Life(), max(10*d.cfg.NodeTimeout, time.Second))
			err := d.repair(ctx, i, RepairConfig{online: true})
			cancel()
			var soon *RepairTooSoonError
			switch {
			case err == nil:
				return
			case errors.As(err, &soon):
				pause = soon.Wait + time.Millisecond
			case errors.Is(err, redis.ErrClosed) || errors.Is(err, round.ErrClosed) ||
				errors.Is(err, kind.ErrNotProvisioned) || err == errNotAdoptable:
				d.log.Debug("redlock: online repair stopped", "node", i, "err", err)
				return
			default:
				pause = min(2*pause, d.cfg.TTL)
				d.log.Debug("redlock: online repair not possible yet", "node", i, "err", err)
			}
			if !sleepCtx(d.rounds.Life(), pause) {
				return
			}
		}
	})
	if !started {
		d.repairing[i].Store(false)
	}
}

// onlineRepairTries bounds a background repair; the next amnesia reply from
// the node starts another.
const onlineRepairTries = 100
