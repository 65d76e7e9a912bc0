package chaos

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/node"
)

// Expect is what a scenario should do to mutual exclusion without fencing.
type Expect int

const (
	Holds    Expect = iota // no two holders overlap
	Expected               // holders overlap; the run must show it, or it tested nothing
	Possible               // holders may overlap
)

func (e Expect) String() string {
	return [...]string{"holds", "overlap expected", "overlap possible"}[e]
}

// Scenario is a fault schedule.
type Scenario struct {
	Name        string
	Fault       string // what it does, in a phrase
	Unfenced    Expect // mutual exclusion without fencing
	Persistence node.Persistence
	// Inject runs alongside the workload until ctx ends.
	Inject func(ctx context.Context, e *Env) error
}

func pause(n node.Node) error  { return n.Pause(context.Background()) }
func resume(n node.Node) error { return n.Resume(context.Background()) }
func cut(n node.Node) error    { return n.Cut(context.Background()) }
func heal(n node.Node) error   { return n.Heal(context.Background()) }
func kill(n node.Node) error   { return n.Kill(context.Background()) }
func start(n node.Node) error  { return n.Start(context.Background()) }
func jump(d time.Duration) func(node.Node) error {
	return func(n node.Node) error { return n.JumpClock(context.Background(), d) }
}
func latency(d time.Duration) func(node.Node) error {
	return func(n node.Node) error { return n.SetLatency(context.Background(), d) }
}
func jitter(latency, jitter time.Duration) func(node.Node) error {
	return func(n node.Node) error { return n.SetJitter(context.Background(), latency, jitter) }
}
func bandwidth(kbPerSec int) func(node.Node) error {
	return func(n node.Node) error { return n.SetBandwidth(context.Background(), kbPerSec) }
}
func resetPeer(n node.Node) error { return n.ResetPeer(context.Background(), 0) }
func halfOpen(n node.Node) error  { return n.HalfOpen(context.Background(), 0) }

// jumpWhileHeld jumps the clocks of n0-n2 by d each time a worker is a
// moment into its critical section, resting between jumps.
func jumpWhileHeld(ctx context.Context, e *Env, d time.Duration, what string, rest time.Duration) error {
	for e.WaitHeld(ctx) && e.Sleep(ctx, e.TTL/20) {
		if err := e.Do(ctx, []int{0, 1, 2}, what, jump(d), nil, 0); err != nil {
			return err
		}
		e.Sleep(ctx, rest)
	}
	return nil
}

// Scenarios is the table of docs/chaos.md, in order.
var Scenarios = []Scenario{
	{
		Name: "minority-down", Fault: "2 of 5 nodes paused, then killed and restarted with their data",
		Unfenced: Holds, Persistence: node.PersistAOFAlways,
		Inject: func(ctx context.Context, e *Env) error {
			for ctx.Err() == nil {
				if err := e.Do(ctx, []int{3, 4}, "paused", pause, resume, e.TTL*3/2); err != nil {
					return err
				}
				e.Sleep(ctx, e.TTL/2)
				if err := e.Do(ctx, []int{4}, "killed, restarted with data", kill, start, e.TTL/2); err != nil {
					return err
				}
				e.Sleep(ctx, e.TTL/2)
			}
			return nil
		},
	},
	{
		Name: "client-pause", Fault: "a holder stops for 2x TTL right after acquiring",
		Unfenced: Expected,
		Inject: func(ctx context.Context, e *Env) error {
			for e.Sleep(ctx, e.TTL/2) && e.PauseNextHolder(ctx, 2*e.TTL) {
				e.Sleep(ctx, 2*e.TTL)
			}
			return nil
		},
	},
	{
		Name: "clock-forward", Fault: "n0-n2 clocks jump 2x TTL forward while a lock is held; n3, n4 cut off",
		Unfenced: Expected,
		Inject: func(ctx context.Context, e *Env) error {
			if err := e.Do(ctx, []int{3, 4}, "cut off", cut, nil, 0); err != nil {
				return err
			}
			return jumpWhileHeld(ctx, e, 2*e.TTL, "clock +2xTTL", e.TTL/2)
		},
	},
	{
		Name: "clock-backward", Fault: "n0-n2 clocks jump 2x TTL back while a lock is held",
		Unfenced: Holds,
		Inject: func(ctx context.Context, e *Env) error {
			return jumpWhileHeld(ctx, e, -2*e.TTL, "clock -2xTTL", e.TTL)
		},
	},
	{
		Name: "restart-empty", Fault: "a node killed and restarted at once without its data",
		Unfenced: Possible, Persistence: node.PersistNone,
		Inject: func(ctx context.Context, e *Env) error {
			for i := 0; ctx.Err() == nil; i = (i + 1) % 2 {
				if !e.WaitHeld(ctx) {
					return nil
				}
				if err := e.Do(ctx, []int{i}, "killed, restarted empty", kill, start, 0); err != nil {
					return err
				}
				e.Sleep(ctx, e.TTL) // the empty node stays out of fenced quorums meanwhile
				if err := e.Repair(ctx, i); err != nil && ctx.Err() == nil {
					return err
				}
				e.Sleep(ctx, e.TTL/2)
			}
			return nil
		},
	},
	{
		Name: "restart-delayed", Fault: "a node killed and restarted empty after 2x TTL",
		Unfenced: Holds, Persistence: node.PersistNone,
		Inject: func(ctx context.Context, e *Env) error {
			for i := 0; ctx.Err() == nil; i = (i + 1) % 2 {
				if err := e.Do(ctx, []int{i}, "killed, restarted empty later", kill, start, 2*e.TTL); err != nil {
					return err
				}
				if err := e.Repair(ctx, i); err != nil && ctx.Err() == nil {
					return err
				}
				e.Sleep(ctx, e.TTL/2)
			}
			return nil
		},
	},
	{
		Name: "rolling-wipes", Fault: "a random node restarted empty every 0.4-0.8x TTL; nobody runs Repair",
		Unfenced: Possible, Persistence: node.PersistNone,
		Inject: func(ctx context.Context, e *Env) error {
			// Wiped nodes come back only through the workers' own online
			// repair; with a wipe this often, at times too few are intact.
			for e.Sleep(ctx, e.TTL*2/5+rand.N(e.TTL*2/5)) {
				i := rand.N(len(e.Nodes))
				if err := e.Do(ctx, []int{i}, "killed, restarted empty", kill, start, 0); err != nil {
					return err
				}
			}
			return nil
		},
	},
	{
		Name: "slow-links", Fault: "n1, n2 slowed by 20ms; links to n3, n4 cut and healed during acquisitions",
		Unfenced: Holds,
		Inject: func(ctx context.Context, e *Env) error {
			if err := e.Do(ctx, []int{1, 2}, "latency 20ms", latency(20*time.Millisecond), nil, 0); err != nil {
				return err
			}
			for ctx.Err() == nil {
				if err := e.Do(ctx, []int{3}, "cut off", cut, heal, e.TTL/3); err != nil {
					return err
				}
				if err := e.Do(ctx, []int{4}, "cut off", cut, heal, e.TTL/3); err != nil {
					return err
				}
				if err := e.Do(ctx, []int{3, 4}, "cut off", cut, heal, e.TTL/4); err != nil {
					return err
				}
			}
			return nil
		},
	},
	{
		Name: "jittery-links", Fault: "n1, n2 slowed by 15±15ms (n2 also to 32 KB/s); n3 resets connections, n4 goes half-open",
		Unfenced: Holds,
		Inject: func(ctx context.Context, e *Env) error {
			if err := e.Do(ctx, []int{1, 2}, "latency 15±15ms", jitter(15*time.Millisecond, 15*time.Millisecond), nil, 0); err != nil {
				return err
			}
			if err := e.Do(ctx, []int{2}, "bandwidth 32KB/s", bandwidth(32), nil, 0); err != nil {
				return err
			}
			// Two of five links break at a time at most: the rest are a
			// quorum, slow and uneven.
			for ctx.Err() == nil {
				if err := e.Do(ctx, []int{3}, "connections reset", resetPeer, heal, e.TTL/2); err != nil {
					return err
				}
				if err := e.Do(ctx, []int{4}, "half-open", halfOpen, heal, e.TTL/2); err != nil {
					return err
				}
				if err := e.Do(ctx, []int{3, 4}, "half-open", halfOpen, heal, e.TTL/3); err != nil {
					return err
				}
				e.Sleep(ctx, e.TTL/4)
			}
			return nil
		},
	},
}

// Calibration recreates counterexample 1 of docs/fencing.md inside the
// harness: worker 0 reaches only n0-n2, worker 1 only n2-n4, and n0's
// counter starts high. Quorum tokens stay ordered; the naive max-of-INCR
// scheme hands worker 1 smaller tokens than worker 0 got before, which the
// token-order checker must catch. Run it with two workers.
var Calibration = Scenario{
	Name: "asymmetric", Fault: "worker 0 reaches only n0-n2, worker 1 only n2-n4; n0's counter starts high",
	Unfenced: Holds,
	Inject: func(ctx context.Context, e *Env) error {
		e.CutLinks(0, 3, 4)
		e.CutLinks(1, 0, 1)
		return e.SetCounter(ctx, 0, 1000)
	},
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}
