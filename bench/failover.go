package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The failover step (issue 36): how long an election goes without a
// leader when its leader's process dies. The leader's links to every node
// are cut at once (a crash or a partition: it releases nothing, and its
// lease runs out on the nodes); a second candidate waits in line with the
// client's default retry delays. Failover is the time from the cut to the
// second candidate's Campaign returning, its term granted and its value
// published: it is acting. client-go's leaderelection, for comparison,
// states its own bound in its docs: a dead leader is replaced within its
// LeaseDuration (15 s by default) plus a RetryPeriod (2 s) at most.
var failoverTTLs = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second}

// cutLink fails every command once cut is set: a dead leader's wire.
type cutLink struct{ cut *atomic.Bool }

var errDead = errors.New("bench: the leader's process is dead")

func (h cutLink) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h cutLink) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.cut.Load() {
			cmd.SetErr(errDead)
			return errDead
		}
		return next(ctx, cmd)
	}
}
func (h cutLink) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.cut.Load() {
			for _, c := range cmds {
				c.SetErr(errDead)
			}
			return errDead
		}
		return next(ctx, cmds)
	}
}

// failover measures one failover of an election on set's nodes with ttl.
func failover(ctx context.Context, set *nodeSet, ttl time.Duration, run int) (time.Duration, error) {
	var dead atomic.Bool
	leaderNodes := newClients(set.addrs, false)
	for _, n := range leaderNodes {
		n.AddHook(cutLink{&dead})
	}
	defer closeAll(leaderNodes)
	leaderClient, err := redlock.New(leaderNodes, redlock.WithTTL(ttl))
	if err != nil {
		return 0, err
	}
	defer leaderClient.Close()
	o, err := newOurs(set.addrs, redlock.WithTTL(ttl))
	if err != nil {
		return 0, err
	}
	defer o.close()
	name := fmt.Sprintf("failover-%v-%d-%d", ttl, run, time.Now().UnixNano())
	e1, err := leaderClient.Election(name)
	if err != nil {
		return 0, err
	}
	e2, err := o.(*ours).c.Election(name)
	if err != nil {
		return 0, err
	}
	if _, err := e1.Campaign(ctx, "first"); err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 4*ttl+10*time.Second)
	defer cancel()
	next := make(chan error, 1)
	var acting time.Time
	go func() {
		ld, err := e2.Campaign(wctx, "second")
		acting = time.Now()
		if err == nil {
			_ = ld.Resign(context.Background())
		}
		next <- err
	}()
	time.Sleep(ttl / 2) // the second candidate waits in line, the leader extends
	killed := time.Now()
	dead.Store(true)
	if err := <-next; err != nil {
		return 0, err
	}
	return acting.Sub(killed), nil
}

func (b *bench) failoverStep(ctx context.Context, set *nodeSet, run int, rd *runData) {
	rd.failover = map[time.Duration]time.Duration{}
	for _, ttl := range failoverTTLs {
		d, err := failover(ctx, set, ttl, run)
		if err != nil {
			progress("failover, TTL %v: %v", ttl, err)
			continue
		}
		rd.failover[ttl] = d
	}
}

func (r *report) failoverTable(p func(string, ...any)) {
	if len(r.runs) == 0 || r.runs[0].failover == nil {
		return
	}
	p("\n## Election failover (issue 36)\n\n")
	p("A leader's links to every node are cut at once (its process died, releasing nothing); a second candidate ")
	p("waits in line with the default retry delays. Failover is the time from the cut to the second ")
	p("candidate's `Campaign` returning (its term granted, its value published), on the %s nodes.\n\n", r.setOf(true))
	p("| election | failover, median [min–max] over the runs | as a share of the TTL |\n|---|---|---|\n")
	for _, ttl := range failoverTTLs {
		s := r.across(func(rd *runData) float64 { return float64(rd.failover[ttl]) })
		share := r.across(func(rd *runData) float64 { return float64(rd.failover[ttl]) / float64(ttl) })
		p("| this library, TTL %v | %v [%v–%v] | %.2f [%.2f–%.2f] |\n", ttl,
			time.Duration(s.med).Round(time.Millisecond), time.Duration(s.lo).Round(time.Millisecond),
			time.Duration(s.hi).Round(time.Millisecond), share.med, share.lo, share.hi)
	}
	p("| client-go leaderelection, its defaults (15 s lease, 10 s renew deadline, 2 s retry), as its docs state | up to 17 s (LeaseDuration + RetryPeriod), not measured here | up to 1.13 of its lease |\n")
	p("\nThe leader's own work stops before its lease can pass (Leadership.Context ends at Do's margin), so the ")
	p("failover above is all time in which nobody acts; with fencing, the new leader's term is above the old one's.\n")
}
