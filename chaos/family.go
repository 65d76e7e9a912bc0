package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The lock family's workloads (Config.Primitive): the workers take a
// read-write lock, a semaphore's permits or multi-locks instead of the
// mutex, under the same scenarios, and every hold records the resource it
// guards (a multi-lock, one hold per member), so that the checkers judge
// each resource as they judge the mutex's one (familycheck.go).
const (
	Mutex     = ""          // the mutex: the harness's own workload
	RWLock    = "rwlock"    // a third of the acquisitions write, the rest read
	Semaphore = "semaphore" // FamilyPermits permits over the workers
	MultiLock = "multilock" // each acquisition takes two of three names
	Election  = "election"  // every worker a candidate; a leadership is a hold of "leader", its term the token
)

// Primitives are the lock family's workloads, in the demo's order.
var Primitives = []string{RWLock, Semaphore, MultiLock, Election}

// FamilyScenarios are the scenarios the demo runs the family's workloads
// under: kills and pauses, a paused client, clock jumps, empty restarts.
var FamilyScenarios = []string{"minority-down", "client-pause", "clock-forward", "restart-empty"}

// FamilyPermits is the semaphore workload's K: fewer than the workers, so
// that they contend for slots.
const FamilyPermits = 2

// multiNames are the multi-lock workload's names; a worker takes two.
var multiNames = []string{"a", "b", "c"}

// held is what a family worker holds: any of the family's handles.
type held interface {
	Token() uint64
	Until() time.Time
	Nodes() []redlock.NodeResult
}

// runFamily is one worker of the family's workloads: acquire, read each
// resource (fenced with the token: a reader's read raises the read mark),
// think, and, unless reading, write each plus one; release; again until
// ctx ends.
func (w *workload) runFamily(ctx context.Context, id int, c *redlock.Client) {
	rw, _ := c.RWMutex("chaos")
	sem, _ := c.Semaphore("chaos", FamilyPermits)
	election, _ := c.Election("chaos")
	for seq := 0; ctx.Err() == nil; seq++ {
		inv := w.now()
		actx, cancel := context.WithTimeout(ctx, 3*w.cfg.TTL)
		var l held
		var resources []string
		var release func(context.Context) error
		reader := false
		var err error
		switch w.cfg.Primitive {
		case RWLock:
			var h *redlock.RWLock
			if reader = rand.N(3) != 0; reader {
				h, err = rw.RLock(actx)
			} else {
				h, err = rw.Lock(actx)
			}
			if err == nil {
				l, resources, release = h, []string{"doc"}, h.Unlock
			}
		case Semaphore:
			// A quarter of the requests are for every permit at once (all
			// or none), so that they wait in the same line as the single
			// ones: a permit of several slots is one hold per slot.
			var p *redlock.Permit
			if rand.N(4) == 0 {
				p, err = sem.AcquireN(actx, FamilyPermits)
			} else {
				p, err = sem.Acquire(actx)
			}
			if err == nil {
				l, resources, release = p, p.Names(), p.Release
			}
		case MultiLock:
			k := (id + seq) % len(multiNames)
			set := []string{multiNames[k], multiNames[(k+1)%len(multiNames)]}
			var m *redlock.MultiLock
			if m, err = c.LockMulti(actx, set); err == nil {
				l, resources, release = m, m.Names(), m.Unlock
			}
		case Election:
			// A leader acts for a think time, then resigns: the next
			// candidate in line takes over, as a service's leader hands
			// over when it stops.
			var ld *redlock.Leadership
			if ld, err = election.Campaign(actx, leaderValue(Hold{Worker: id, Seq: seq})); err == nil {
				l, resources, release = leadership{ld}, []string{"leader"}, ld.Resign
			}
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.h.addFailure(Failure{Worker: id, Invoke: inv, End: w.now(), Err: err.Error()})
			}
			continue
		}
		w.holdFamily(id, seq, Hold{Worker: id, Seq: seq, Invoke: inv, Grant: w.now(), Until: l.Until().Sub(w.start),
			Token: l.Token(), Nodes: outcomes(l.Nodes()), Reader: reader}, resources, release)
		time.Sleep(rand.N(w.cfg.TTL / 10))
	}
}

// leadership is an election's leadership as a hold: its term is its token.
type leadership struct{ *redlock.Leadership }

func (l leadership) Token() uint64               { return l.Term() }
func (l leadership) Nodes() []redlock.NodeResult { return nil }

// holdFamily is one critical section over resources, recorded as one hold
// per resource.
func (w *workload) holdFamily(id, seq int, x Hold, resources []string, release func(context.Context) error) {
	w.inCS.Add(1)
	x.Paused = w.maybePause(id)
	holder := fmt.Sprintf("w%d#%d", id, seq)
	xs := make([]Hold, len(resources))
	for i, r := range resources {
		xs[i] = x
		xs[i].Resource = r
		xs[i].Read = w.readAt(w.familyResource(r), w.familyKey(r), x.Token, holder, x.Reader)
	}
	time.Sleep(w.think())
	if !x.Reader {
		for i, r := range resources {
			if xs[i].Read.Accepted {
				xs[i].Write = w.writeAt(w.familyResource(r), w.familyKey(r), x.Token, holder, xs[i].Read.Value+1)
			}
		}
	}
	w.inCS.Add(-1)
	end := w.now()
	unlock := ""
	if err := release(context.Background()); err != nil {
		unlock = err.Error()
	}
	for i := range xs {
		xs[i].End, xs[i].Unlock = end, unlock
		w.h.addHold(xs[i])
	}
}

// familyResource is the fence's resource of a family resource, and
// familyKey its counter's key.
func (w *workload) familyResource(r string) string { return w.resource() + ":" + r }
func (w *workload) familyKey(r string) string      { return "{" + w.familyResource(r) + "}:counter" }

// finals reads every family resource's counter at the end of the run.
func (w *workload) finals(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, x := range w.h.Holds {
		if _, ok := out[x.Resource]; ok {
			continue
		}
		v, err := w.store.Get(ctx, w.familyKey(x.Resource)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		out[x.Resource] = v
	}
	return out, nil
}
