package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
)

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
	for superseded := 0; ; {
		err := e.admin.Repair(ctx, i)
		var soon *redlock.RepairTooSoonError
		switch {
		case errors.As(err, &soon):
			if !e.Sleep(ctx, soon.Wait) {
				return nil
			}
		case errors.Is(err, redlock.ErrAmnesia) && superseded < 5:
			// The workers' clients repair a wiped node online too: this
			// repair found the node changed under it (repaired by one of
			// them, or wiped again) and wrote nothing. Look again.
			superseded++
			if !e.Sleep(ctx, e.TTL/10) {
				return nil
			}
		default:
			return err
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
