package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The go-redis hooks the tests inject into a client: each holds back,
// fails, delays or watches the calls of chosen library scripts on the
// wire, so that a test forces the order it replays.

// holdTTL holds, after the node ran it, the reply of every extend call
// whose TTL argument is ttl, until open is closed.
type holdTTL struct {
	ttl     string
	arrived chan struct{}
	open    chan struct{}
}

func (h *holdTTL) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdTTL) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *holdTTL) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if redlock.ScriptName(args) != "extend" || !carries(args, h.ttl) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		h.arrived <- struct{}{}
		<-h.open
		return err
	}
}

// carries reports whether one of a call's arguments reads s.
func carries(args []any, s string) bool {
	for _, a := range args {
		if fmt.Sprint(a) == s {
			return true
		}
	}
	return false
}

// failScript fails every call of one library script (by ScriptName): a
// provisioning step interrupted on every node.
type failScript string

func (failScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (failScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f failScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) == string(f) {
			err := errors.New("interrupted")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// beforeScript runs fn before every call of one library script on the
// client it hooks: a forced order between a provisioner's steps.
type beforeScript struct {
	name string
	fn   func()
}

func (beforeScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (beforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (b beforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) == b.name {
			b.fn()
		}
		return next(ctx, cmd)
	}
}

// countScript counts the calls of one library script on one wire.
type countScript struct {
	name string
	n    *atomic.Int64
}

func (h countScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h countScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) == h.name {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// delayScripts holds back, while armed, every call of the named scripts by d
// on one wire.
func delayScripts(armed *atomic.Bool, d time.Duration, scripts ...string) *faultHook {
	return &faultHook{before: func(s string) error {
		if armed.Load() {
			for _, name := range scripts {
				if s == name {
					time.Sleep(d)
				}
			}
		}
		return nil
	}}
}

// delayScript delays the named script on a link by d, always: a node slow
// to answer (a fsync stall, a busy node), yet alive.
func delayScript(d time.Duration, script string) *faultHook {
	var always atomic.Bool
	always.Store(true)
	return delayScripts(&always, d, script)
}

// hangScript holds the named script on a link until release closes, or d.
func hangScript(d time.Duration, script string, release chan struct{}) *faultHook {
	return &faultHook{before: func(s string) error {
		if s == script {
			select {
			case <-release:
			case <-time.After(d):
			}
		}
		return nil
	}}
}

// both runs a's fault, then b's.
func both(a, b *faultHook) *faultHook {
	return &faultHook{before: func(s string) error {
		if err := a.before(s); err != nil {
			return err
		}
		return b.before(s)
	}}
}

// captureHook fails, while armed, the named script's call without sending
// it (the link cut), and keeps its arguments: the copy of a call that sat
// in a socket, to be delivered by hand after the rollback.
type captureHook struct {
	script string
	armed  *atomic.Bool
	got    chan []any
}

func (h captureHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h captureHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h captureHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() && redlock.ScriptName(cmd.Args()) == h.script {
			select {
			case h.got <- append([]any(nil), cmd.Args()...):
			default:
			}
			cmd.SetErr(errLinkCut)
			return errLinkCut
		}
		return next(ctx, cmd)
	}
}

// chain runs hooks in order (the first outermost).
type chain []redis.Hook

func (c chain) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c chain) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c chain) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	for i := len(c) - 1; i >= 0; i-- {
		next = c[i].ProcessHook(next)
	}
	return next
}

// afterScript runs fn after a call of the library script called name has
// returned from the node, on the call's goroutine (so the caller sees the
// reply only once fn returns).
type afterScript struct {
	name string
	fn   func()
}

func (afterScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (afterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (a afterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// Not on a NOSCRIPT reply: the call is sent again, as EVAL.
		if err == nil && redlock.ScriptName(cmd.Args()) == a.name {
			a.fn()
		}
		return err
	}
}

// holdValue is a hook on one node's client for the acquisitions of one
// lock value (the first the client sends, unless value is preset): it
// holds them, either after the node has run them (late, the reply is held
// back) or before they are sent (early: sent later, on a context that is
// no longer cancelled, as a request already in the socket would land).
// Each held call reports on landed; all go on when release is closed.
type holdValue struct {
	value   *atomic.Pointer[string] // shared by the nodes' hooks: the first value seen
	early   bool
	landed  chan<- int
	node    int
	release <-chan struct{}
}

func (h holdValue) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h holdValue) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h holdValue) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if redlock.ScriptName(args) != "acquire" {
			return next(ctx, cmd)
		}
		v := lockValue(args)
		h.value.CompareAndSwap(nil, &v)
		if *h.value.Load() != v {
			return next(ctx, cmd)
		}
		wait := func() {
			select {
			case <-h.release:
			case <-time.After(10 * time.Second): // bounded, whatever the test does
			}
		}
		if h.early {
			h.landed <- h.node
			wait()
			return next(context.WithoutCancel(ctx), cmd)
		}
		err := next(ctx, cmd)
		h.landed <- h.node
		wait()
		return err
	}
}

// afterHook runs f after the command got its reply, before the caller sees it.
type afterHook func(ctx context.Context, script string)

func (h afterHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h afterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h(ctx, redlock.ScriptName(cmd.Args()))
		return err
	}
}

// releasePanics is a client hook that panics on every release script.
type releasePanics struct{}

func (releasePanics) DialHook(next redis.DialHook) redis.DialHook { return next }

func (releasePanics) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) == "release" {
			panic("test: the client panics on a release")
		}
		return next(ctx, cmd)
	}
}

func (releasePanics) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
