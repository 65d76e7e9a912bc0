package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
	"github.com/redis/go-redis/v9"
)

// workload is the workers' shared state.
type workload struct {
	cfg    Config
	h      *History
	start  time.Time
	store  *redis.Client
	fence  *fence.Redis
	inCS   atomic.Int32
	pauses chan time.Duration // a pause for the next holder to take
	links  links
}

func (w *workload) now() time.Duration { return time.Since(w.start) }

func (w *workload) lockOptions() []redlock.Option {
	return []redlock.Option{
		redlock.WithTTL(w.cfg.TTL),
		redlock.WithNodeTimeout(w.cfg.NodeTimeout),
		redlock.WithRetryDelay(5*time.Millisecond, 30*time.Millisecond),
		redlock.WithLogger(w.cfg.Logger),
	}
}

func (w *workload) resource() string { return "chaos:" + w.cfg.Scenario.Name }
func (w *workload) dataKey() string  { return "{" + w.resource() + "}:counter" }

// think is how long a holder works between its read and its write.
func (w *workload) think() time.Duration { return w.cfg.TTL / 5 }

// run is one worker: lock, read the counter, think, write it plus one,
// unlock; again until ctx ends.
func (w *workload) run(ctx context.Context, id int, lk Locker) {
	for seq := 0; ctx.Err() == nil; seq++ {
		inv := w.now()
		actx, cancel := context.WithTimeout(ctx, 3*w.cfg.TTL)
		l, err := lk.Lock(actx, "chaos")
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.h.addFailure(Failure{Worker: id, Invoke: inv, End: w.now(), Err: err.Error()})
			}
			continue
		}
		x := Hold{Worker: id, Seq: seq, Invoke: inv, Grant: w.now(), Until: l.Until().Sub(w.start),
			Token: l.Token(), Nodes: outcomes(l.Nodes())}
		w.inCS.Add(1)
		x.Paused = w.maybePause(id)
		holder := fmt.Sprintf("w%d#%d", id, seq)
		x.Read = w.read(l.Token(), holder)
		if x.Read.Accepted {
			time.Sleep(w.think())
			x.Write = w.write(l.Token(), holder, x.Read.Value+1)
		}
		w.inCS.Add(-1)
		x.End = w.now()
		if err := l.Unlock(context.Background()); err != nil {
			x.Unlock = err.Error()
		}
		w.h.addHold(x)
		// Rest a little between jobs, as real workers do; without it the
		// releasing worker tends to win the lock straight back.
		time.Sleep(rand.N(w.cfg.TTL / 10))
	}
}

// maybePause stops worker id, right after it acquired, for the pause a
// scenario left for the next holder (Env.PauseNextHolder), if any, and
// records it; it returns how long.
func (w *workload) maybePause(id int) time.Duration {
	select {
	case d := <-w.pauses:
		i := w.h.addFault(Fault{At: w.now(), Target: fmt.Sprintf("worker %d", id), What: "client paused"})
		if w.cfg.Primitive == Election {
			// A paused process's leadership keep-alive is paused with it
			// (the cilium overrun: the leader stalls past its lease, then
			// writes): its wires to the nodes carry nothing meanwhile.
			for n := range w.cfg.Nodes {
				w.links.set(id, n, true)
			}
			defer func() {
				for n := range w.cfg.Nodes {
					w.links.set(id, n, false)
				}
			}()
		}
		time.Sleep(d)
		w.h.endFault(i, w.now())
		return d
	default:
		return 0
	}
}

func (w *workload) read(token uint64, holder string) *Op {
	return w.readAt(w.resource(), w.dataKey(), token, holder, false)
}

// readAt reads key, fenced as resource's with token when fencing is on: as
// a read-write lock's reader's read (the read mark) if reader.
func (w *workload) readAt(resource, key string, token uint64, holder string, reader bool) *Op {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	op := &Op{Start: w.now()}
	var s string
	var err error
	switch {
	case w.cfg.Fenced && reader:
		s, err = w.fence.GetRead(ctx, resource, token, holder, key)
	case w.cfg.Fenced:
		s, err = w.fence.Get(ctx, resource, token, holder, key)
	default:
		s, err = w.store.Get(ctx, key).Result()
	}
	op.End = w.now()
	if errors.Is(err, redis.Nil) {
		s, err = "0", nil
	}
	w.settle(op, err)
	op.Value, _ = strconv.ParseInt(s, 10, 64)
	return op
}

func (w *workload) write(token uint64, holder string, v int64) *Op {
	return w.writeAt(w.resource(), w.dataKey(), token, holder, v)
}

// writeAt sets key to v, fenced as resource's with token when fencing is on.
func (w *workload) writeAt(resource, key string, token uint64, holder string, v int64) *Op {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	op := &Op{Start: w.now(), Value: v}
	var err error
	if w.cfg.Fenced {
		err = w.fence.Set(ctx, resource, token, holder, key, strconv.FormatInt(v, 10), 0)
	} else {
		err = w.store.Set(ctx, key, v, 0).Err()
	}
	op.End = w.now()
	w.settle(op, err)
	return op
}

func (w *workload) settle(op *Op, err error) {
	switch {
	case err == nil:
		op.Accepted = true
	case errors.Is(err, fence.ErrStale), errors.Is(err, fence.ErrTokenReused):
		op.Refused, op.Err = true, err.Error()
		var stale *fence.StaleTokenError
		if errors.As(err, &stale) {
			op.Highest = stale.Highest
		}
	default:
		op.Err = err.Error()
		w.h.addError("store: " + err.Error())
	}
}

func outcomes(rs []redlock.NodeResult) string {
	b := make([]byte, 0, len(rs))
	for _, r := range rs {
		c := byte('?')
		switch r.Outcome {
		case redlock.NodeGranted:
			c = '+'
		case redlock.NodeRefused:
			c = '-'
		case redlock.NodeNoReply:
			c = '.'
		case redlock.NodeTimedOut:
			c = 't'
		case redlock.NodeFailed:
			c = 'x'
		case redlock.NodeAmnesiac:
			c = 'a'
		}
		b = append(b, c)
	}
	return string(b)
}
