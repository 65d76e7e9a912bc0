package redlock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
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
