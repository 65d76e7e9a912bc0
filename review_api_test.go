package redlock_test

// Adversarial review of issue 23's API additions (For, Extend to a new
// TTL, ErrReleased on Extend racing Unlock). Each test replays one break
// with a forced order on real redis-server nodes.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

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
func TestReviewConcurrentExtendsLeaveUntilPastTheKeys(t *testing.T) {
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

// Break 2: ErrReleased hides a lock taken by another holder. The holder's
// keys are lost (emptied, as an operator's DEL or a node restarted
// without data would leave them) while its Extend is held before it is
// sent; another client takes the lock; the holder's Unlock then reports
// ErrExpired (the nodes hold the other client's value), yet the Extend,
// refused by every node because another holder holds them, reports
// ErrReleased, whose doc says this handle's own Unlock took the keys.
func TestReviewErrReleasedHidesAnotherHolder(t *testing.T) {
	cl := startCluster(t, 3)
	gate := newGate("extend", true)
	c := cl.hookedOn(t, map[int]redis.Hook{0: gate, 1: gate, 2: gate},
		redlock.WithTTL(10*time.Second), redlock.WithNodeTimeout(3*time.Second))
	other := cl.newClient(t, redlock.WithTTL(10*time.Second))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "hidden")
	if err != nil {
		t.Fatal(err)
	}
	extended := make(chan error, 1)
	go func() { extended <- l.Extend(ctx) }()
	for range 3 {
		select {
		case <-gate.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the extension never reached the gate")
		}
	}
	for _, n := range cl.inspect {
		if err := n.Del(ctx, "redlock:{hidden}").Err(); err != nil {
			t.Fatal(err)
		}
	}
	o, err := other.TryLock(ctx, "hidden")
	if err != nil {
		t.Fatalf("the other client: %v", err)
	}
	defer o.Unlock(ctx)
	uerr := l.Unlock(ctx)
	close(gate.open)
	err = <-extended
	if !errors.Is(uerr, redlock.ErrExpired) {
		t.Fatalf("Unlock: %v, want ErrExpired (another holder)", uerr)
	}
	if errors.Is(err, redlock.ErrReleased) {
		t.Errorf("Extend: %v; the keys were another holder's, not taken by this handle's Unlock (which said %v)", err, uerr)
	}
}

// Break 3: Do keeps extending at the TTL it had when its timer was armed.
// fn shortens the lock (Extend(For(3s)) of a 30s lock): the keep-alive's
// next extension is still 10s away, the lock's validity ends after 3s,
// and Do cancels fn with ErrLockLost though every node is up.
func TestReviewDoKeepsAShortenedLock(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	err := c.Do(context.Background(), "shortened", func(fctx context.Context, l *redlock.Lock) error {
		if err := l.Extend(fctx, redlock.For(3*time.Second)); err != nil {
			return err
		}
		select {
		case <-fctx.Done():
			return fmt.Errorf("fn's context ended after fn shortened the lock, all nodes up: %w", context.Cause(fctx))
		case <-time.After(8 * time.Second):
			return nil
		}
	})
	if err != nil {
		t.Error(err)
	}
}

// Break 4: ErrNilOption covers New's and the lock calls' options, but a
// nil RepairOption still panics: Repair calls every option it is given.
func TestReviewRepairRefusesANilOption(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Repair(ctx, 0, nil) panicked: %v", r)
			}
		}()
		err = c.Repair(context.Background(), 0, nil)
	}()
	if !errors.Is(err, redlock.ErrNilOption) {
		t.Errorf("Repair(ctx, 0, nil): %v, want ErrNilOption", err)
	}
}

// Break 5: a shortening Extend that fails still shortens the nodes it
// reached late. Before For an extension could only lengthen a key, so a
// failed one left the old Until safe whatever the nodes did with it. Forced
// order: two of three nodes are stopped (SIGSTOP) while Extend(For(2s)) of
// a 30s lock is sent; it times out there and fails, and Until stays ~30s
// away. The stopped nodes, resumed, run the PEXPIRE 2000 still in their
// socket buffers: with the node that answered, every key expires after 2s,
// another client takes the lock, and two hold it while the first's Done
// is open.
func TestReviewFailedShorteningExtendKeepsTheOldUntil(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(300*time.Millisecond))
	other := cl.newClient(t, redlock.WithTTL(30*time.Second))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "late-short")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	resume := cl.pause(t, 1, 2)
	err = l.Extend(ctx, redlock.For(2*time.Second))
	resume()
	if err == nil {
		t.Fatal("Extend succeeded with two of three nodes stopped")
	}
	t.Logf("Extend(For(2s)) with two nodes stopped: %v; Until in %v", err, time.Until(l.Until()).Round(time.Second))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-l.Done():
			return // the holder's own clock ended it: consistent
		default:
		}
		if o, err := other.TryLock(ctx, "late-short"); err == nil {
			_ = o.Unlock(ctx)
			t.Fatalf("another client took the lock while its holder's Done is open and Until is %v away",
				time.Until(l.Until()).Round(time.Second))
		}
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
