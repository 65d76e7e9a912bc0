package node_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/node"
	"go.uber.org/goleak"
)

// proxied starts a node behind its Toxiproxy; the node closes with the test.
func proxied(t *testing.T, name string) *node.Process {
	t.Helper()
	n, err := node.StartProcess(context.Background(), node.Config{Name: name, Proxy: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestJitter(t *testing.T) {
	ctx := context.Background()
	n := proxied(t, "jitter")
	c := n.NewClient()
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const lat, jit = 40 * time.Millisecond, 30 * time.Millisecond
	if err := n.SetJitter(ctx, lat, jit); err != nil {
		t.Fatal(err)
	}
	lo, hi := time.Hour, time.Duration(0)
	for range 20 {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		lo, hi = min(lo, took), max(hi, took)
	}
	// Each way waits at least latency-jitter; the draws make round trips
	// differ (uniform over ±jitter each way, 20 of them all within 5 ms of
	// each other is out of reach).
	if lo < 2*(lat-jit) {
		t.Errorf("fastest PING took %v, under 2x(latency-jitter) = %v", lo, 2*(lat-jit))
	}
	if hi-lo < 5*time.Millisecond {
		t.Errorf("PINGs took %v to %v: no jitter", lo, hi)
	}
	if err := n.SetJitter(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := n.SetJitter(ctx, -time.Millisecond, 0); err == nil {
		t.Error("negative latency accepted")
	}
}

func TestBandwidth(t *testing.T) {
	ctx := context.Background()
	n := proxied(t, "bandwidth")
	c := n.NewClient()
	defer c.Close()
	const rate, size = 10, 20 << 10 // KB/s, bytes: two seconds' worth
	if err := n.SetBandwidth(ctx, rate); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", size)
	start := time.Now()
	if err := c.Set(ctx, "big", value, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("%d bytes at %d KB/s took %v, want about 2s", size, rate, took)
	}
	if err := n.SetBandwidth(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.Get(ctx, "big").Val(); got != value {
		t.Fatalf("value of %d bytes read back as %d bytes", size, len(got))
	}
}

// Resets leave no goroutine behind, even with bytes still coming on the
// reset connections (Toxiproxy's own reset_peer leaks one per connection).
func TestResetPeer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	n, err := node.StartProcess(ctx, node.Config{Name: "reset", Proxy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	before := n.NewClient() // its connection predates the fault
	defer before.Close()
	if err := before.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.ResetPeer(ctx, 0); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte("PING\r\n"))
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := raw.Read(make([]byte, 16)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read on a new connection: %v, want connection reset by peer", err)
	}
	after := n.NewClient()
	defer after.Close()
	if err := after.Ping(ctx).Err(); err == nil || isTimeout(err) {
		t.Errorf("go-redis PING on a new connection: %v, want it broken", err)
	}
	if err := before.Ping(ctx).Err(); err == nil || isTimeout(err) {
		t.Errorf("PING on an open connection: %v, want it closed", err)
	}
	// More bytes on connections opened under the fault.
	for range 3 {
		r, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			r.Write([]byte("PING\r\n"))
		}
		r.Close()
	}
	if err := n.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := after.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Heal: %v", err)
	}
	// The same with a half-open link that closes.
	if err := n.HalfOpen(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			r.Write([]byte("PING\r\n"))
			time.Sleep(5 * time.Millisecond)
		}
		r.Close()
	}
	after.Close()
	before.Close()
	raw.Close()
	n.Close()
}

func TestHalfOpen(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	n, err := node.StartProcess(ctx, node.Config{Name: "halfopen", Proxy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := n.NewClient()
	defer c.Close()
	if err := c.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.HalfOpen(ctx, 0); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = c.Incr(callCtx, "k").Err()
	cancel()
	if !isTimeout(err) {
		t.Fatalf("INCR through a half-open link: %v, want a timeout", err)
	}
	// A raw connection keeps sending across the Heal.
	raw, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte("PING\r\n"))
	if err := n.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		raw.Write([]byte("PING\r\n"))
		time.Sleep(5 * time.Millisecond)
	}
	// Unlike a Cut, the dropped INCR never reaches the server.
	time.Sleep(100 * time.Millisecond)
	if v := c.Get(ctx, "k").Val(); v != "1" {
		t.Fatalf("k = %q after Heal, want the dropped INCR lost (1)", v)
	}

	// With closeAfter the connection ends instead of hanging.
	if err := n.HalfOpen(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel = context.WithTimeout(ctx, 5*time.Second)
	err = c.Ping(callCtx).Err()
	cancel()
	if err == nil || isTimeout(err) {
		t.Fatalf("PING with closeAfter: %v, want the connection closed", err)
	}
	n.Heal(ctx)
	c.Close()
	raw.Close()
	n.Close()
}

func TestSlicing(t *testing.T) {
	ctx := context.Background()
	n := proxied(t, "slicer")
	c := n.NewClient()
	defer c.Close()
	if err := n.SetSlicing(ctx, 3, 100*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("0123456789", 30)
	if err := c.Set(ctx, "k", value, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := c.Get(ctx, "k").Val(); got != value {
		t.Fatalf("sliced round trip: %q", got)
	}
	if err := n.SetSlicing(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
}

// Closing a node while its link is cut and a command is held must stop
// every goroutine Toxiproxy started for it.
func TestCloseWhileCut(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	n, err := node.StartProcess(ctx, node.Config{Name: "closecut", Proxy: true})
	if err != nil {
		t.Fatal(err)
	}
	c := n.NewClient()
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	n.Cut(ctx)
	n.HalfOpen(ctx, 0)
	n.SetJitter(ctx, 10*time.Millisecond, 5*time.Millisecond)
	callCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	c.Ping(callCtx)
	cancel()
	n.Close()
	if err := n.Cut(ctx); !errors.Is(err, node.ErrClosed) {
		t.Errorf("Cut after Close: %v, want ErrClosed", err)
	}
	c.Close()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
