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

// Break 1: two Extends of one lock in flight at once, with different TTLs,
// leave Until past the keys (Lock's methods are documented safe for
// concurrent use, and Do runs its keep-alive's Extend, with the lock's
// current TTL, while fn may Extend it For another). Forced order: an
// Extend(For(1m)) runs on every node and its replies are held; a plain
// Extend (TTL 3s, the lock's TTL when it began) then runs on every node
// after it, so every key is left at 3s, and succeeds; then the first
// Extend's replies are let through, and it, deciding last, moves Until to
// a minute and the lock's TTL to a minute. The keys expire after 3s while
// Done stays open: another client takes the lock, and two hold it.
//
// In Do the same happens when fn's Extend(For(1m)) decides after the
// keep-alive's extension has re-armed its timer: the keep-alive then
// waits 20s, and the 3s keys expire under fn.
// Origin: an adversarial review of the API's edges.
func TestConcurrentExtendsLeaveUntilPastTheKeys(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	h := &holdTTL{ttl: "60000", arrived: make(chan struct{}, 8), open: make(chan struct{})}
	c := cl.hookedOn(t, map[int]redis.Hook{0: h, 1: h, 2: h},
		redlock.WithTTL(3*time.Second), redlock.WithNodeTimeout(time.Second))
	other := cl.newClient(t, redlock.WithTTL(3*time.Second))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "concurrent-extends")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	long := make(chan error, 1)
	go func() { long <- l.Extend(ctx, redlock.For(time.Minute)) }()
	for range 3 {
		select {
		case <-h.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("Extend(For(1m)) never reached the nodes")
		}
	}
	// The plain Extend runs now if Extends may overlap; if they run one at
	// a time it waits for the held one, which is let go after a while.
	plain := make(chan error, 1)
	go func() { plain <- l.Extend(ctx) }()
	select {
	case err := <-plain:
		plain <- err
	case <-time.After(2 * time.Second):
	}
	close(h.open)
	if err := <-long; err != nil {
		t.Fatalf("Extend(For(1m)): %v", err)
	}
	if err := <-plain; err != nil {
		t.Fatalf("plain Extend: %v", err)
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-l.Done():
			return // the lock ended on its own clock: consistent
		default:
		}
		if o, err := other.TryLock(ctx, "concurrent-extends"); err == nil {
			_ = o.Unlock(ctx)
			t.Fatalf("another client took the lock while its holder's Done is open and Until is %v away",
				time.Until(l.Until()).Round(time.Second))
		}
	}
}
