package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/node"
)

func TestCutHealAndLatency(t *testing.T) {
	ctx := context.Background()
	n, err := node.StartProcess(ctx, node.Config{Name: "link", Proxy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := n.NewClient()
	defer c.Close()
	if err := c.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.Incr(callCtx, "k").Err()
	cancel()
	if err == nil {
		t.Fatal("INCR answered through a cut link")
	}
	if err := n.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	// The held INCR is delivered after the heal, like a retransmission.
	deadline := time.Now().Add(5 * time.Second)
	for c.Get(ctx, "k").Val() != "2" {
		if time.Now().After(deadline) {
			t.Fatalf("held command not delivered after Heal: k=%q", c.Get(ctx, "k").Val())
		}
		time.Sleep(10 * time.Millisecond)
	}

	const lat = 30 * time.Millisecond
	if err := n.SetLatency(ctx, lat); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 2*lat {
		t.Errorf("PING took %v with %v latency each way", took, lat)
	}
	n.SetLatency(ctx, 0)

	// Killing the node behind the relay closes the client's connection.
	if err := n.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered by a killed node")
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
}

func TestJumpClock(t *testing.T) {
	ctx := context.Background()
	n, err := node.StartProcess(ctx, node.Config{Name: "clock", FakeClock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := n.NewClient()
	defer c.Close()
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, "short", "v", 60*time.Second)
	if err := n.JumpClock(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	after, _ := c.Time(ctx).Result()
	if d := after.Sub(before); d < 89*time.Second || d > 120*time.Second {
		t.Fatalf("TIME moved by %v after a 90s jump", d)
	}
	if n := c.Exists(ctx, "short").Val(); n != 0 {
		t.Fatal("a key with 60s to live survived a 90s forward jump")
	}
	c.Set(ctx, "long", "v", time.Second)
	if err := n.JumpClock(ctx, -60*time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, "long").Val(); ttl < 30*time.Second {
		t.Fatalf("after a 60s backward jump a 1s key has PTTL %v, want about 61s", ttl)
	}
	// The offset survives a restart.
	n.Kill(ctx)
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	again, _ := c.Time(ctx).Result()
	if d := again.Sub(before); d < 25*time.Second || d > 60*time.Second {
		t.Fatalf("after restart TIME is %v from the start, want about +30s", d)
	}
}

func TestFaultsNeedTheirOption(t *testing.T) {
	ctx := context.Background()
	n, err := node.StartProcess(ctx, node.Config{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for name, err := range map[string]error{
		"Cut":        n.Cut(ctx),
		"SetLatency": n.SetLatency(ctx, time.Millisecond),
		"JumpClock":  n.JumpClock(ctx, time.Second),
	} {
		if !errors.Is(err, node.ErrNotEnabled) {
			t.Errorf("%s without its option: %v, want ErrNotEnabled", name, err)
		}
	}
}
