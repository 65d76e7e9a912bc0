package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/quorumlock/redlock"
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

// Env is what a scenario's Inject works with.
type Env struct {
	Nodes  node.Group
	TTL    time.Duration
	h      *History
	w      *workload
	admin  *redlock.Client
	fenced bool
}

// Sleep waits d or until ctx ends; false if ctx ended.
func (e *Env) Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Do runs one fault on the given nodes and records it; end, if not nil,
// undoes it after d (or when ctx ends) and closes the record.
func (e *Env) Do(ctx context.Context, nodes []int, what string, do, undo func(node.Node) error, d time.Duration) error {
	target := ""
	for i, n := range nodes {
		if i > 0 {
			target += ","
		}
		target += e.Nodes[n].Name()
	}
	rec := e.h.addFault(Fault{At: e.w.now(), Target: target, What: what})
	for _, n := range nodes {
		if err := do(e.Nodes[n]); err != nil {
			return fmt.Errorf("%s %s: %w", what, e.Nodes[n].Name(), err)
		}
	}
	if undo == nil {
		return nil
	}
	e.Sleep(ctx, d)
	var errs []error
	for _, n := range nodes {
		errs = append(errs, undo(e.Nodes[n]))
	}
	e.h.endFault(rec, e.w.now())
	return errors.Join(errs...)
}

// PauseNextHolder makes the next worker that acquires the lock stop for d
// right after acquiring, before it touches the store. It returns once a
// worker has taken the pause.
func (e *Env) PauseNextHolder(ctx context.Context, d time.Duration) bool {
	select {
	case e.w.pauses <- d:
		return true
	case <-ctx.Done():
		return false
	}
}

// WaitHeld waits until some worker is inside its critical section.
func (e *Env) WaitHeld(ctx context.Context) bool {
	for e.w.inCS.Load() == 0 {
		if !e.Sleep(ctx, time.Millisecond) {
			return false
		}
	}
	return true
}

// CutLinks cuts the links between one worker and the given nodes, for
// the rest of the run: an asymmetric partition.
func (e *Env) CutLinks(worker int, nodes ...int) {
	target := fmt.Sprintf("worker %d", worker)
	for _, n := range nodes {
		e.w.links.set(worker, n, true)
		target += " x " + e.Nodes[n].Name()
	}
	e.h.addFault(Fault{At: e.w.now(), Target: target, What: "links cut"})
}

// SetCounter overwrites the fencing counter G of node i, to recreate the
// state of a counterexample.
func (e *Env) SetCounter(ctx context.Context, i int, c int64) error {
	rc := e.Nodes[i].NewClient()
	defer rc.Close()
	e.h.addFault(Fault{At: e.w.now(), Target: e.Nodes[i].Name(), What: fmt.Sprintf("counter set to %d", c)})
	return rc.Set(ctx, "redlock:fence:counter", c, 0).Err()
}

// Repair brings back a node restarted without its data (fenced runs).
func (e *Env) Repair(ctx context.Context, i int) error {
	if !e.fenced {
		return nil
	}
	rec := e.h.addFault(Fault{At: e.w.now(), Target: e.Nodes[i].Name(), What: "repaired"})
	defer func() { e.h.endFault(rec, e.w.now()) }()
	for {
		err := e.admin.Repair(ctx, i)
		var soon *redlock.RepairTooSoonError
		if !errors.As(err, &soon) {
			return err
		}
		if !e.Sleep(ctx, soon.Wait) {
			return nil
		}
	}
}

func (e *Env) healAll(ctx context.Context) {
	for _, n := range e.Nodes {
		n.Heal(ctx)
		n.SetJitter(ctx, 0, 0)
		n.SetBandwidth(ctx, 0)
		n.SetSlicing(ctx, 0, 0)
		n.Resume(ctx)
	}
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

// illegal names the first model porcupine found violated, or "".
func illegal(models []ModelCheck) string { return firstWith(models, porcupine.Illegal) }

// undecided names the first model porcupine could not decide within its
// time limit, or "". Such a check proved nothing, and porcupine searches
// longest exactly when a history is not linearizable: it is no pass.
func undecided(models []ModelCheck) string { return firstWith(models, porcupine.Unknown) }

func firstWith(models []ModelCheck, r porcupine.CheckResult) string {
	for _, m := range models {
		if m.Result == r {
			return m.Model
		}
	}
	return ""
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

// Verdict is whether a run showed what its scenario promises.
type Verdict struct {
	OK   bool
	Text string
}

func judge(s Scenario, fenced bool, h *History, f Findings, models []ModelCheck) Verdict {
	// A holder that overran its validity was paused or starved: its late
	// write is the client-pause case even where the scenario injects none.
	overran := f.Overruns > 0 && s.Unfenced == Holds
	switch {
	case len(h.Errors) > 0:
		return Verdict{false, "ERROR: " + h.Errors[0]}
	case len(h.Holds) == 0:
		return Verdict{false, "NO OPERATIONS"}
	case f.Duplicates > 0 || f.TokenOrder > 0:
		return Verdict{false, "BUG: token order"}
	case fenced && (f.StaleAccepted > 0 || f.LostWrites > 0):
		return Verdict{false, "BUG: stale write accepted"}
	case illegal(models) != "":
		return Verdict{false, "BUG: porcupine: " + illegal(models) + " not linearizable, which the hand-written checkers missed"}
	case undecided(models) != "":
		return Verdict{false, "UNCHECKED: porcupine could not decide " + undecided(models) + " within its time limit"}
	case s.Unfenced == Holds && f.LeaseOverlaps > 0:
		return Verdict{false, "BUG: leases overlapped"}
	case !fenced && s.Unfenced == Holds && !overran && (f.Overlaps > 0 || f.StaleAccepted > 0 || f.LostWrites > 0):
		return Verdict{false, "BUG: holders overlapped"}
	case !fenced && s.Unfenced == Expected && f.Overlaps == 0:
		return Verdict{false, "NOT EXERCISED: no overlap shown"}
	case overran:
		return Verdict{true, fmt.Sprintf("ok, but %d holders overran their validity (machine too slow)", f.Overruns)}
	case fenced && f.Overlaps > 0:
		return Verdict{true, "ok: overlap, no stale write"}
	case !fenced && f.Overlaps > 0:
		return Verdict{true, "ok: overlap as expected"}
	}
	return Verdict{true, "ok"}
}
