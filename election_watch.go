package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quorumlock/redlock/internal/fairqueue"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/redis/go-redis/v9"
)

// LeaderInfo is what Election.Leader saw of the leader.
type LeaderInfo struct {
	// Value is the leader's published value: the latest proclamation of
	// this leadership among the nodes that answered.
	Value string
	// Term is the leader's fencing token, as Inspect reports a lock's.
	Term uint64
	// ID is the leadership's id (Leadership.ID).
	ID string
	// Remaining is how long a majority of the nodes will still hold the
	// leadership by their TTLs, as LockInfo.Remaining: the leader extends
	// it while it leads.
	Remaining time.Duration
}

// leaderAnswer is one node's reply to nodescript.Leader.
type leaderAnswer struct {
	lock  NodeLock
	id    string
	seq   int64
	value string
}

// Leader reads, in one read-only round, who leads the election: the
// leadership held on a majority of the nodes, its term and its published
// value. With none held, or one whose value a majority of the nodes does
// not show yet (a Campaign that has not returned, or whose value has not
// reached the nodes that answer), it fails with ErrNoLeader; with fewer than a
// majority of answers, as Client.Inspect does. A snapshot, with Inspect's
// caveats: the leader may resign or lose the lease the moment it returns.
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	c := e.c
	key := c.lockKey(e.name)
	keys := []any{key, e.valueKey()}
	if c.cfg.fencing {
		keys = append(keys, lease.HighKey(key))
	}
	r, err := inspectRound(ctx, c, e.name, nodescript.NewCall(nodescript.Leader, keys), parseLeader)
	if r == nil {
		return LeaderInfo{}, err
	}
	if err != nil {
		return LeaderInfo{}, err
	}
	info := LockInfo{Name: e.name, Nodes: make([]NodeLock, len(r.answers))}
	for i, a := range r.answers {
		info.Nodes[i] = a.lock
	}
	info.judge(r.majority, r.elapsed, c.cfg.driftOf)
	if !info.Held {
		return LeaderInfo{}, fmt.Errorf("%w: election %q", ErrNoLeader, e.name)
	}
	out := LeaderInfo{Term: info.Token, ID: info.Holder, Remaining: info.Remaining}
	best, published := int64(0), 0
	for i, a := range r.answers {
		if r.errs[i] != nil || a.id != info.Holder || a.seq == 0 {
			continue
		}
		published++
		if a.seq > best {
			best, out.Value = a.seq, a.value
		}
	}
	if published < r.majority {
		// Held, but not published on a majority: a campaign between its
		// Lock and the end of its first Proclaim (which may yet fail and
		// resign), not yet a leader. The keep-alive publishes the value
		// again every extension, so a leader whose value missed a node
		// that answers now shows within TTL/3.
		return LeaderInfo{}, fmt.Errorf("%w: election %q (a candidate is taking office)", ErrNoLeader, e.name)
	}
	return out, nil
}

// parseLeader reads nodescript.Leader's reply.
func parseLeader(cmd *redis.Cmd) (leaderAnswer, error) {
	v, err := cmd.Slice()
	if err != nil {
		return leaderAnswer{}, wrongTypeOf(err)
	}
	if len(v) != 6 {
		return leaderAnswer{}, fmt.Errorf("redlock: unexpected reply %v", v)
	}
	locks, err := parseLocks(v[:3], 1)
	if err != nil {
		return leaderAnswer{}, err
	}
	a := leaderAnswer{lock: locks[0]}
	a.id, _ = v[3].(string)
	a.seq, _ = strconv.ParseInt(fmt.Sprint(v[4]), 10, 64)
	a.value, _ = v[5].(string)
	return a, nil
}

// Observe returns a channel of the election's leaders as they change: a
// LeaderInfo each time another leadership, or a new value of the same one,
// is seen. It reads Leader when a node announces a change (a new leader
// proclaims its value at once; a leader that resigns with nobody in line
// releases the lock), so a change usually shows within a round trip or
// two; and at the latest every ObservePoll(TTL) (a tenth of the client's
// TTL, between 50 ms and 1 s), which covers what nobody announces (a
// leader whose lease ran out, a notification lost with a node's
// connection). A leadership shorter than that may not show at all. With
// fencing, terms only grow on the channel: a reading that shows an older
// term than one already sent is skipped. Readings that fail (no leader, a
// majority silent) send nothing. The channel closes when ctx ends; its
// goroutine ends with it.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	ch := make(chan LeaderInfo)
	every := observePoll(e.c.cfg.ttl)
	wake := make(chan fairqueue.WakeReason, 1)
	stop, _ := e.c.queue.Watch(e.c.lockKey(e.name), observerID, wake)
	go func() {
		defer close(ch)
		defer stop()
		var last LeaderInfo
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-wake:
				t.Stop()
			}
			info, err := e.Leader(ctx)
			changed := info.ID != last.ID || info.Value != last.Value
			// A new value of the same leadership is news whatever its term
			// reads: a leadership's term never goes back.
			if err == nil && changed && (!e.c.cfg.fencing || info.Term >= last.Term || info.ID == last.ID) {
				select {
				case ch <- info:
					last = info
				case <-ctx.Done():
					return
				}
			}
			t.Reset(every)
		}
	}()
	return ch
}

// observerID is the id Observe watches an election's lock key under: the
// payload of Proclaim's announcement (lua/proclaim.lua).
const observerID = fairqueue.ObserverPrefix + "leader"

// observePoll is ObservePoll, which the tests may stretch to show that a
// change reaches Observe without it.
var observePoll = ObservePoll

// ObservePoll is how often Observe reads the leader for a client whose TTL
// is ttl.
func ObservePoll(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 50*time.Millisecond), time.Second)
}

// Run campaigns with value, runs fn while this candidate leads, and
// campaigns again when the leadership is lost, until ctx ends. fn's
// context ends when ctx does or the leadership ends, before its lease can
// pass (its cause says which: ErrLockLost when lost). When fn returns,
// Run resigns; fn returning nil or an error other than its context's ends
// Run with that result, and its context ending by a lost leadership
// campaigns again. Run returns ctx's cause when ctx ends, and Campaign's
// error when it is not a temporary one (bad configuration, a node list or
// key of the wrong kind).
func (e *Election) Run(ctx context.Context, value string, fn func(ctx context.Context, l *Leadership) error) error {
	if fn == nil {
		return ErrNilFunc
	}
	for {
		ld, err := e.Campaign(ctx, value)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrLocked) && !errors.Is(err, ErrNotLeader) {
				return err
			}
			// Lock has waited out its own outage bound: pause before the
			// next campaign, so that an error that comes at once cannot spin.
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(ObservePoll(e.c.cfg.ttl)):
			}
			continue
		}
		fctx := ld.Context(ctx)
		fnErr := fn(fctx, ld)
		lost := errors.Is(context.Cause(fctx), ErrLockLost)
		_ = ld.Resign(context.WithoutCancel(ctx))
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case lost && (fnErr == nil || errors.Is(fnErr, context.Canceled) || errors.Is(fnErr, ErrLockLost)):
			continue
		}
		return fnErr
	}
}
