package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// errNotAdoptable ends a repair of a node that holds no member of the
// roster when this client never saw which member the node held: only an
// operator's Repair with RepairAdopting may pick one then.
var errNotAdoptable = fmt.Errorf("%w: the node holds no member of the deployment's roster, and this client never "+
	"saw it hold one: it lost all its data, or it is not the deployment's node. If it stands for the one member "+
	"no node holds, and the server that held it will never serve again, repair it with RepairAdopting "+
	"(`redlock repair --adopt`); otherwise fix the node list", ErrAmnesia)

// remember records the uuid each intact node holds (at every check of the
// node list, and at every repair's read): what an online repair may give
// back to a node that lost its data.
func (c *Client) remember(states []*nodeState) {
	c.knownMu.Lock()
	defer c.knownMu.Unlock()
	for i, s := range states {
		if s != nil && s.intact() {
			c.known[i] = s.uuid
		}
	}
}

func (c *Client) knownUUID(i int) string {
	c.knownMu.Lock()
	defer c.knownMu.Unlock()
	return c.known[i]
}

// repairOnline repairs node i in the background, once per episode: it waits
// out the delayed restart and retries while no majority is intact, for at
// most a bounded number of tries, and stops at Close.
func (c *Client) repairOnline(i int) {
	if !c.repairing[i].CompareAndSwap(false, true) {
		return
	}
	started := c.rounds.Go(func() {
		defer c.repairing[i].Store(false)
		pause := max(c.cfg.ttl/10, c.cfg.nodeTimeout)
		for try := 0; try < onlineRepairTries; try++ {
			ctx, cancel := context.WithTimeout(c.rounds.Life(), max(10*c.cfg.nodeTimeout, time.Second))
			err := c.repair(ctx, i, repairConfig{online: true})
			cancel()
			var soon *RepairTooSoonError
			switch {
			case err == nil:
				return
			case errors.As(err, &soon):
				pause = soon.Wait + time.Millisecond
			case errors.Is(err, redis.ErrClosed) || errors.Is(err, ErrClosed) ||
				errors.Is(err, ErrNotProvisioned) || err == errNotAdoptable:
				c.log.Debug("redlock: online repair stopped", "node", i, "err", err)
				return
			default:
				pause = min(2*pause, c.cfg.ttl)
				c.log.Debug("redlock: online repair not possible yet", "node", i, "err", err)
			}
			if !sleepCtx(c.rounds.Life(), pause) {
				return
			}
		}
	})
	if !started {
		c.repairing[i].Store(false)
	}
}

// onlineRepairTries bounds a background repair; the next amnesia reply from
// the node starts another.
const onlineRepairTries = 100
