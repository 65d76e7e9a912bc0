package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/procguard"
)

// jobRun is one run of exec's job under its lock: the state of
// holdWhileRunning's loop.
type jobRun struct {
	l       lease
	guard   *procguard.Guardian
	h       holding
	taken   time.Time
	group   processGroup
	name    string // the command, for messages
	release *bool  // cleared when the lock is kept (a tick's name)

	leader      bool             // the job's leader still runs
	draining    *time.Ticker     // the leader exited and the rest of its group is awaited
	kill        *time.Timer      // the SIGKILL that follows a SIGTERM by --grace
	killed      bool             // the group got SIGKILL
	lost        error            // why the lock was lost, once it was
	result      error            // the leader's outcome, once it exited
	signals     int              // SIGINTs and SIGTERMs received
	interrupted bool             // a signal or a cancellation: no holding on after the job
	extending   bool             // an extension is in flight
	extended    chan error       // its outcome
	held        <-chan time.Time // after the job: the end of --hold-for
	ahead       *time.Timer      // --elect: when the lease has --grace plus the margin left
}

// running reports whether anything of the job may still run.
func (r *jobRun) running() bool { return r.leader || r.draining != nil }

// terminate sends sig to the group and arms the SIGKILL that follows it
// by --grace, unless one is armed or sent already.
func (r *jobRun) terminate(sig syscall.Signal) {
	r.group.signal(sig)
	if r.kill == nil && !r.killed {
		r.kill = time.NewTimer(r.h.grace)
	}
}

func (r *jobRun) killGroup() {
	r.group.signal(syscall.SIGKILL)
	r.killed = true
}

// stop is the lock's loss while the job runs.
func (r *jobRun) stop(why error) {
	r.lost = why
	fmt.Fprintf(os.Stderr, "redlock: lock %q lost (%v); sending SIGTERM to %s and its process group, SIGKILL in %v\n",
		r.l.Name(), why, r.name, r.h.grace)
	r.terminate(syscall.SIGTERM)
}

func (r *jobRun) loop(ctx context.Context, sigs <-chan os.Signal, exited <-chan error) error {
	r.leader = true
	r.extended = make(chan error, 1)
	// Extensions run in their own goroutine, so that the loop sees the
	// validity end while one waits for the nodes (up to the node timeout).
	defer func() {
		if r.extending {
			<-r.extended // bounded by the node timeout
		}
		if r.kill != nil {
			r.kill.Stop()
		}
		if r.draining != nil {
			r.draining.Stop()
		}
	}()
	tick := time.NewTicker(r.h.ttl / 3)
	defer tick.Stop()
	interrupted, expired := ctx.Done(), r.l.Done()
	// A leadership's job is stopped --grace before its SIGKILL, which
	// lands killMargin before the lease ends: ahead fires when the lease
	// has that little left, unless the keep-alive moved it meanwhile.
	var aheadC <-chan time.Time
	if r.h.killMargin > 0 {
		ahead := time.NewTimer(time.Until(r.l.Until()) - r.h.killMargin - r.h.grace)
		defer ahead.Stop()
		aheadC = ahead.C
		r.ahead = ahead
	}
	for {
		var killC, drainC <-chan time.Time
		if r.kill != nil {
			killC = r.kill.C
		}
		if r.draining != nil {
			drainC = r.draining.C
		}
		select {
		case err := <-exited:
			exited, r.leader = nil, false
			r.result = err
			if errors.Is(err, procguard.ErrGuardianLost) {
				// The leader is no longer watched: nothing of the job may run on.
				r.killGroup()
				r.result = &exitError{1, fmt.Errorf("lost track of %s: %w", r.name, err)}
			}
			if r.group.alive() && !r.killed {
				// What the leader left behind must not outlive the lock.
				r.terminate(syscall.SIGTERM)
				r.draining = time.NewTicker(20 * time.Millisecond)
				continue
			}
			if done, err := r.ended(); done {
				return err
			}
		case <-drainC:
			if r.group.alive() && !r.killed {
				continue
			}
			r.draining.Stop()
			r.draining = nil
			if done, err := r.ended(); done {
				return err
			}
		case <-r.held:
			return r.finish()
		case <-killC:
			r.kill = nil
			r.killGroup()
		case s := <-sigs:
			r.signals++
			r.interrupted = true
			switch {
			case !r.running(): // holding on after the job: an interrupt ends it
				return r.finish()
			case r.signals > 1:
				r.killGroup()
			default:
				r.terminate(s.(syscall.Signal))
			}
		case <-interrupted:
			interrupted = nil
			r.interrupted = true
			if !r.running() {
				return r.finish()
			}
			if _, ok := context.Cause(ctx).(signalled); !ok {
				// Cancelled by a caller, not a signal (which sigs passed on).
				r.terminate(syscall.SIGTERM)
			}
		case <-aheadC:
			left := time.Until(r.l.Until())
			if left > r.h.killMargin+r.h.grace {
				// The keep-alive extended it, on a schedule of its own: move
				// the guardian's deadline now, not at the next tick, which
				// may come after the old one.
				_ = r.guard.Deadline(r.h.killAt(r.l.Until()))
				r.ahead.Reset(left - r.h.killMargin - r.h.grace)
				continue
			}
			aheadC = nil
			if r.running() && r.lost == nil {
				r.stop(fmt.Errorf("the leadership's lease has %v left, --grace plus the margin: its keep-alive "+
					"has not reached a majority in time", left.Round(time.Millisecond)))
			}
		case <-expired:
			expired = nil
			if !r.running() {
				fmt.Fprintf(os.Stderr, "redlock: lock %q lost after the command ended, within --hold-for\n", r.l.Name())
				return r.result
			}
			if r.lost == nil {
				r.stop(errors.New("validity ended"))
			}
		case <-tick.C:
			if r.lost != nil || r.extending {
				continue
			}
			r.extending = true
			go func() { r.extended <- r.l.Extend(context.Background()) }()
		case err := <-r.extended:
			r.extending = false
			if err == nil {
				_ = r.guard.Deadline(r.h.killAt(r.l.Until()))
			}
			if r.lost == nil && err != nil && (errors.Is(err, redlock.ErrExpired) || time.Until(r.l.Until()) <= r.h.ttl/3) {
				if !r.running() {
					fmt.Fprintf(os.Stderr, "redlock: lock %q lost after the command ended, within --hold-for: %v\n", r.l.Name(), err)
					return r.result
				}
				r.stop(err)
			}
		}
	}
}

// ended is the end of the job: its leader exited and nothing of its group
// runs. It returns the outcome, or false while the lock is held on for
// --hold-for.
func (r *jobRun) ended() (bool, error) {
	if r.lost != nil {
		return true, &exitError{75, lostError{fmt.Errorf("lock %q lost while the command ran: %w", r.l.Name(), r.lost)}}
	}
	left := time.Until(r.taken.Add(r.h.holdFor))
	if left <= 0 || r.interrupted {
		return true, r.finish()
	}
	r.held = time.After(left)
	return false, nil
}

// finish ends a run whose job has ended. A kept lock (a tick's name) is
// extended once more, so that it stays taken a whole TTL after the job or
// the hold ended, not just what was left of the last extension.
func (r *jobRun) finish() error {
	if r.h.keep {
		*r.release = false
		if r.extending {
			<-r.extended
			r.extending = false
		}
		if err := r.l.Extend(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "redlock: could not extend %q one last time: %v\n", r.l.Name(), err)
		}
	}
	return r.result
}

// lostError marks exec's own exit 75, the lock or leadership lost, apart
// from a command that exits 75 by itself (EX_TEMPFAIL): --elect --again
// campaigns again after the first only.
type lostError struct{ error }

func (e lostError) Unwrap() error { return e.error }
