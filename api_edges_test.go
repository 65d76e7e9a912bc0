package redlock_test

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// Issue 23 §5: a nil Option is refused with a typed error, not a panic.
func TestNewRefusesANilOption(t *testing.T) {
	cl := startCluster(t, 3)
	var c *redlock.Client
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("New panicked on a nil Option: %v", r)
			}
		}()
		c, err = redlock.New(cl.clients, redlock.WithTTL(time.Second), nil)
	}()
	if !errors.Is(err, redlock.ErrNilOption) || c != nil {
		t.Fatalf("New with a nil Option: %v, %v; want ErrNilOption and no client", c, err)
	}
	if !strings.Contains(err.Error(), "opts[1]") {
		t.Errorf("the error does not say which option: %v", err)
	}
}

// Do with a nil function is refused before anything is acquired: the old
// code took the lock and then panicked, leaving the lock held for a TTL.
func TestDoRefusesANilFunctionBeforeLocking(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t)
	ctx := context.Background()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Do panicked on a nil function: %v", r)
			}
		}()
		err = c.Do(ctx, "nil-fn", nil)
	}()
	if !errors.Is(err, redlock.ErrNilFunc) {
		t.Errorf("Do(nil): %v, want ErrNilFunc", err)
	}
	for i, v := range cl.holders(t, "nil-fn") {
		if v != "" {
			t.Errorf("node %d holds %q: Do acquired before refusing the nil function", i, v)
		}
	}
}

// A retry delay whose maximum is below MinRetryDelay is refused: (0, 0)
// was 500 attempts a second per waiter while a lock was held.
func TestNewRefusesARetryDelayBelowTheFloor(t *testing.T) {
	cl := startCluster(t, 3)
	for _, d := range [][2]time.Duration{{0, 0}, {0, redlock.MinRetryDelay - 1}, {-1, time.Second}, {2 * time.Second, time.Second}} {
		_, err := redlock.New(cl.clients, redlock.WithRetryDelay(d[0], d[1]))
		if !errors.Is(err, redlock.ErrBadRetryDelay) {
			t.Errorf("WithRetryDelay(%v, %v): %v, want ErrBadRetryDelay", d[0], d[1], err)
		}
	}
	if _, err := redlock.New(cl.clients, redlock.WithRetryDelay(0, redlock.MinRetryDelay)); err != nil {
		t.Errorf("WithRetryDelay(0, MinRetryDelay): %v", err)
	}
}

// A TTL so long that the arithmetic on it overflows is refused as too
// long, not with an overflowed retention; a long TTL that only the
// retention refuses says to raise WithRetention.
func TestNewSaysWhatIsWrongWithALongTTL(t *testing.T) {
	cl := startCluster(t, 3)
	for _, ttl := range []time.Duration{math.MaxInt64, redlock.MaxTTL + time.Millisecond} {
		_, err := redlock.New(cl.clients, redlock.WithTTL(ttl))
		if !errors.Is(err, redlock.ErrTTLTooLong) {
			t.Errorf("WithTTL(%v): %v, want ErrTTLTooLong", ttl, err)
		}
		if err != nil && strings.Contains(err.Error(), "-") {
			t.Errorf("WithTTL(%v): an overflowed duration in %q", ttl, err)
		}
	}
	for _, fenced := range []bool{true, false} {
		opts := []redlock.Option{redlock.WithTTL(redlock.MaxTTL)}
		if !fenced {
			opts = append(opts, redlock.WithoutFencing())
		} else {
			opts = append(opts, redlock.WithRetention(3*redlock.MaxTTL))
		}
		c, err := redlock.New(cl.clients, opts...)
		if err != nil {
			t.Errorf("WithTTL(MaxTTL), fenced %v: %v", fenced, err)
			continue
		}
		c.Close()
	}
	_, err := redlock.New(cl.clients, redlock.WithTTL(1000*time.Hour))
	if !errors.Is(err, redlock.ErrRetentionTooShort) || !strings.Contains(err.Error(), "WithRetention") {
		t.Errorf("WithTTL(1000h): %v, want ErrRetentionTooShort naming WithRetention", err)
	}
}

// Break 2: ErrReleased hides a lock taken by another holder. The holder's
// keys are lost (emptied, as an operator's DEL or a node restarted
// without data would leave them) while its Extend is held before it is
// sent; another client takes the lock; the holder's Unlock then reports
// ErrExpired (the nodes hold the other client's value), yet the Extend,
// refused by every node because another holder holds them, reports
// ErrReleased, whose doc says this handle's own Unlock took the keys.
// Origin: an adversarial review of the API's edges.
func TestErrReleasedHidesAnotherHolder(t *testing.T) {
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

// From an adversarial review: a zero *redis.Client (not nil) passes New; the first lock then
// panics in a library goroutine, which no caller can recover.
// Origin: the adversarial review of Do and the client's panics.
func TestZeroClientDoesNotCrashTheProcess(t *testing.T) {
	if os.Getenv("ADV_CHILD") == "1" {
		cl := startCluster(t, 3)
		nodes := []redis.UniversalClient{cl.clients[0], cl.clients[1], &redis.Client{}}
		c, err := redlock.New(nodes)
		if err != nil {
			t.Logf("New refused: %v", err)
			return
		}
		defer c.Close()
		func() {
			defer func() { recover() }()
			l, err := c.TryLock(context.Background(), "z")
			if err == nil {
				l.Unlock(context.Background())
			}
		}()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestZeroClientDoesNotCrashTheProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "ADV_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "panic") {
		i := strings.Index(string(out), "panic")
		t.Errorf("BROKE: the process crashed: %.600s", out[i:])
	} else {
		t.Logf("child: %v\n%s", err, out)
	}
}

// From the adversarial review of the calls that ride a batch (older than
// it): the rollback of a lost attempt, and the release's retries, call the
// node's client on goroutines of their own, outside any round's guard, and
// a client that panicked there ended the process. It fails that node's
// call now, as in a round.
// Origin: the adversarial review of Do and the client's panics.
func TestARollbackOnAPanickingClientFailsOnlyThatNode(t *testing.T) {
	if os.Getenv("ADV_CHILD") == "1" {
		cl := startCluster(t, 3)
		c := cl.hookedOn(t, map[int]redis.Hook{0: releasePanics{}}, redlock.WithTTL(20*time.Second))
		cl.holdAsStranger(t, "rp", 1, 2) // node 0 grants, the attempt is lost: node 0 is rolled back
		if _, err := c.TryLock(context.Background(), "rp"); !errors.Is(err, redlock.ErrLocked) {
			t.Errorf("TryLock: %v, want ErrLocked", err)
		}
		time.Sleep(100 * time.Millisecond) // the rollback has been tried
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestARollbackOnAPanickingClientFailsOnlyThatNode$", "-test.v")
	cmd.Env = append(os.Environ(), "ADV_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed (%v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the child did not run the test:\n%s", out)
	}
}

// From an adversarial review: names with NUL, newline, invalid UTF-8 and braces that could alias.
// Origin: the adversarial review of Do and the client's panics.
func TestOddNamesDoNotAlias(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithTTL(5*time.Second))
	ctx := context.Background()
	names := []string{"x", "x}:queue", "x}", "x}:queue:seen", "x}:next", "x}:fence:high", "{x", "a\x00b", "a\nb", "\xff\xfe", "x}:released", "x:promised:0"}
	var held []*redlock.Lock
	for _, n := range names {
		l, err := c.TryLock(ctx, n)
		if err != nil {
			t.Errorf("BROKE? %q: %v", n, err)
			continue
		}
		held = append(held, l)
	}
	for _, l := range held {
		if err := l.Extend(ctx); err != nil {
			t.Errorf("extend %q: %v", l.Name(), err)
		}
	}
	tokens := map[uint64]string{}
	for _, l := range held {
		if o, dup := tokens[l.Token()]; dup {
			t.Logf("%q and %q share token %d", o, l.Name(), l.Token())
		}
		tokens[l.Token()] = l.Name()
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("unlock %q: %v", l.Name(), err)
		}
	}
	// Queue: a waiter on "x" must not be woken by "x}:released"-like names.
	l, _ := c.TryLock(ctx, "x")
	got := lockAndUnlock(c, "x}:queue", 3*time.Second)
	if err := <-got; err != nil {
		t.Errorf("locking x}:queue while x is held: %v", err)
	}
	if l != nil {
		l.Unlock(ctx)
	}
	_ = errors.New
}
