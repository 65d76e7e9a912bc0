package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// linkFaults gives a backend Cut, Heal and SetLatency through a relay.
type linkFaults struct {
	name  string
	proxy *proxy // nil: link faults not enabled
}

func (l *linkFaults) relay() (*proxy, error) {
	if l.proxy == nil {
		return nil, fmt.Errorf("%w: node %s was started without Proxy", ErrNotEnabled, l.name)
	}
	return l.proxy, nil
}

// Cut stalls every byte between clients and the node until Heal: a
// partition that isolates the node. Needs Config.Proxy.
func (l *linkFaults) Cut(context.Context) error {
	p, err := l.relay()
	if err == nil {
		p.setCut(true)
	}
	return err
}

// Heal ends a Cut; held bytes are delivered.
func (l *linkFaults) Heal(context.Context) error {
	p, err := l.relay()
	if err == nil {
		p.setCut(false)
	}
	return err
}

// SetLatency delays every chunk in each direction by d (0 removes it).
// Needs Config.Proxy.
func (l *linkFaults) SetLatency(_ context.Context, d time.Duration) error {
	p, err := l.relay()
	if err == nil {
		p.setLatency(d)
	}
	return err
}

func (l *linkFaults) closeRelay() {
	if l.proxy != nil {
		l.proxy.close()
	}
}

// clockFaults gives a backend JumpClock through libfaketime's offset file.
type clockFaults struct {
	name   string
	file   string // empty: clock faults not enabled
	mu     sync.Mutex
	offset time.Duration
}

// JumpClock moves the node's wall clock by d (negative: backwards), on top
// of earlier jumps; it takes effect at once, restarts included. Needs
// Config.FakeClock.
func (c *clockFaults) JumpClock(_ context.Context, d time.Duration) error {
	if c.file == "" {
		return fmt.Errorf("%w: node %s was started without FakeClock", ErrNotEnabled, c.name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%+.3f\n", c.offset.Seconds()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.file)
}

var errExited = errors.New("server exited")

// waitPing waits until the server at addr answers PING, ctx ends, or
// exited (if not nil) closes.
func waitPing(ctx context.Context, addr string, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for {
		pingCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := c.Ping(pingCtx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
