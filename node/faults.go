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

// linkFaults gives a backend its link faults through an embedded
// Toxiproxy (proxy.go). Every one of them needs Config.Proxy.
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

func (l *linkFaults) set(name, typ string, attrs any) error {
	p, err := l.relay()
	if err != nil {
		return err
	}
	return p.set(name, typ, attrs)
}

// Cut stalls every byte between clients and the node until Heal: a
// partition that isolates the node. Bytes are held, not dropped, and
// delivered after Heal, as TCP retransmission delivers them after a
// partition heals; clients see their reads time out meanwhile.
func (l *linkFaults) Cut(context.Context) error { return l.set(faultCut, stallType, struct{}{}) }

// Heal ends a Cut, ResetPeer or HalfOpen. Held bytes are delivered; latency,
// bandwidth and slicing stay until set to zero.
func (l *linkFaults) Heal(context.Context) error {
	p, err := l.relay()
	if err != nil {
		return err
	}
	return p.heal()
}

// SetLatency delays every chunk in each direction by d (0 removes it).
func (l *linkFaults) SetLatency(ctx context.Context, d time.Duration) error {
	return l.SetJitter(ctx, d, 0)
}

// SetJitter delays every chunk in each direction by latency plus or minus
// up to jitter, drawn for each chunk (both 0 remove it). Order is kept: a
// chunk waits for the one before it. Toxiproxy counts whole milliseconds.
func (l *linkFaults) SetJitter(_ context.Context, latency, jitter time.Duration) error {
	if latency < 0 || jitter < 0 {
		return fmt.Errorf("node: negative latency %v or jitter %v", latency, jitter)
	}
	var attrs any
	if latency > 0 || jitter > 0 {
		attrs = map[string]int64{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()}
	}
	return l.set(faultLatency, "latency", attrs)
}

// SetBandwidth limits each direction to kbPerSec kilobytes a second (0
// removes the limit).
func (l *linkFaults) SetBandwidth(_ context.Context, kbPerSec int) error {
	if kbPerSec < 0 {
		return fmt.Errorf("node: negative bandwidth %d", kbPerSec)
	}
	var attrs any
	if kbPerSec > 0 {
		attrs = map[string]int{"rate": kbPerSec}
	}
	return l.set(faultRate, "bandwidth", attrs)
}

// ResetPeer breaks every connection that carries a byte, after waiting
// after from that byte, until Heal: the byte is dropped and the connection
// closed, the way a middlebox that lost its state answers with a reset.
// Connections opened while the fault is on are reset (RST, "connection
// reset by peer"); Toxiproxy can only close those already open when it
// began (FIN, EOF). New connections are accepted and then reset in turn.
func (l *linkFaults) ResetPeer(_ context.Context, after time.Duration) error {
	if after < 0 {
		return fmt.Errorf("node: negative reset delay %v", after)
	}
	p, err := l.relay()
	if err != nil {
		return err
	}
	// Toxiproxy sets SO_LINGER 0 (a close sends RST) on a connection that
	// starts while a reset_peer toxic is in the chain; at toxicity 0 that
	// one never runs, and closeToxic does the closing without leaking.
	if err := p.setToxicity(faultReset+"-linger", "reset_peer", map[string]int64{"timeout": 0}, 0); err != nil {
		return err
	}
	return p.set(faultReset, closeType, map[string]any{"after": after.Milliseconds(), "on_data": true})
}

// HalfOpen makes the node's end vanish without a word until Heal: every
// byte in both directions is dropped and no FIN or RST comes, so clients
// wait out their timeouts on connections that look open (new ones are
// accepted too). With closeAfter > 0 each connection is closed that long
// after the fault reaches it, as a keepalive finally would. Unlike Cut,
// nothing is delivered after Heal: a connection that lost bytes is out of
// step with the server, and a client must drop it (go-redis drops a
// connection whose read timed out).
func (l *linkFaults) HalfOpen(_ context.Context, closeAfter time.Duration) error {
	if closeAfter < 0 {
		return fmt.Errorf("node: negative close delay %v", closeAfter)
	}
	// Not Toxiproxy's timeout toxic: removing it closes the stub without
	// draining, and the next chunk blocks the toxic before it for good.
	return l.set(faultHalfOpen, closeType, map[string]any{"after": closeAfter.Milliseconds()})
}

// SetSlicing cuts every chunk in each direction into pieces of about
// averageBytes, delay apart, so that replies and commands arrive in
// fragments (0 removes it).
func (l *linkFaults) SetSlicing(_ context.Context, averageBytes int, delay time.Duration) error {
	if averageBytes < 0 || delay < 0 {
		return fmt.Errorf("node: negative slice size %d or delay %v", averageBytes, delay)
	}
	var attrs any
	if averageBytes > 0 {
		attrs = map[string]int64{"average_size": int64(averageBytes), "size_variation": int64(averageBytes / 2),
			"delay": delay.Microseconds()}
	}
	return l.set(faultSlice, "slicer", attrs)
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
