package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// gateScript holds one script's calls at a gate until it opens: before
// they are sent (before) or after the node has run them, with the reply
// held back. arrived counts the calls held.
type gateScript struct {
	name    string
	before  bool
	arrived chan struct{}
	open    chan struct{}
}

func newGate(name string, before bool) *gateScript {
	return &gateScript{name: name, before: before, arrived: make(chan struct{}, 64), open: make(chan struct{})}
}

func (h *gateScript) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook gates a batch that carries the script as a lone call
// is gated: the client's link batches calls made while another is in
// flight to the node (a commit's reply still on its way, on a busy
// machine), and those go out as one pipeline.
func (h *gateScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if redlock.ScriptName(cmd.Args()) == h.name {
				n++
			}
		}
		if n == 0 {
			return next(ctx, cmds)
		}
		var err error
		if !h.before {
			err = next(ctx, cmds)
		}
		for range n {
			h.arrived <- struct{}{}
		}
		<-h.open
		if h.before {
			err = next(ctx, cmds)
		}
		return err
	}
}
func (h *gateScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) != h.name {
			return next(ctx, cmd)
		}
		var err error
		if !h.before {
			err = next(ctx, cmd)
		}
		h.arrived <- struct{}{}
		<-h.open
		if h.before {
			err = next(ctx, cmd)
		}
		return err
	}
}

// Issue 23 §5: an Extend racing this handle's own Unlock reported
// ErrExpired ("may have overlapped another holder"): the Unlock deleted
// the keys before the extension reached them, or the extension's replies
// came back after Unlock had begun. Once Unlock has begun before Extend's
// outcome is decided, Extend reports ErrReleased. Both orders are
// replayed: the extension held before it is sent, and after the nodes ran
// it, with its replies held until Unlock has returned.
func TestExtendRacingUnlockReportsReleased(t *testing.T) {
	cl := startCluster(t, 3)
	for _, before := range []bool{true, false} {
		name := map[bool]string{true: "held-before-sent", false: "replies-held"}[before]
		t.Run(name, func(t *testing.T) {
			gate := newGate("extend", before)
			hooks := map[int]redis.Hook{0: gate, 1: gate, 2: gate}
			c := cl.hookedOn(t, hooks, redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(2*time.Second))
			ctx := context.Background()
			l, err := c.TryLock(ctx, "race-"+name)
			if err != nil {
				t.Fatal(err)
			}
			extended := make(chan error, 1)
			go func() { extended <- l.Extend(ctx) }()
			for range 3 {
				select {
				case <-gate.arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("the extension's calls never reached the gate")
				}
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			close(gate.open)
			select {
			case err = <-extended:
			case <-time.After(10 * time.Second):
				t.Fatal("Extend never returned")
			}
			if !errors.Is(err, redlock.ErrReleased) || errors.Is(err, redlock.ErrExpired) {
				t.Errorf("Extend racing Unlock: %v, want ErrReleased (not ErrExpired)", err)
			}
		})
	}
}
