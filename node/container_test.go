package node_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/node"
)

func TestContainerFaults(t *testing.T) {
	node.RequireDocker(t)
	ctx := context.Background()
	n, err := node.StartContainer(ctx, node.ContainerConfig{Config: node.Config{
		Name: "ct", Persistence: node.PersistAOFAlways, Proxy: true, FakeClock: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := n.NewClient()
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Pause: calls time out; resume: they work again.
	if err := n.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = c.Ping(callCtx).Err()
	cancel()
	if err == nil {
		t.Fatal("PING answered by a paused container")
	}
	if err := n.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitOK(ctx, func() error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatalf("after resume: %v", err)
	}

	// Kill and restart keep the AOF; wiping loses it.
	if err := n.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("after restart k=%q, want v", got)
	}
	n.Kill(ctx)
	if err := n.WipeData(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Exists(ctx, "k").Val(); got != 0 {
		t.Fatal("k survived a restart without data")
	}

	// Clock jump inside the container.
	c.Set(ctx, "ttl", "v", time.Minute)
	if err := n.JumpClock(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := c.Exists(ctx, "ttl").Val(); got != 0 {
		t.Fatal("a key with a minute to live survived a 2-minute forward jump")
	}

	// Cut and heal the link.
	n.Cut(ctx)
	callCtx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.Ping(callCtx).Err()
	cancel()
	if err == nil {
		t.Fatal("PING answered through a cut link")
	}
	n.Heal(ctx)
	if err := waitOK(ctx, func() error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

func waitOK(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With a valkey-server binary (Config.Binary, or REDLOCK_SERVER_BINARY as
// the Valkey CI pass sets it) the host image is built from Valkey, clock
// faults included.
func TestValkeyContainer(t *testing.T) {
	node.RequireDocker(t)
	if _, err := exec.LookPath("valkey-server"); err != nil {
		t.Skip("no valkey-server on this host (bash .ci/install-valkey installs it)")
	}
	ctx := context.Background()
	n, err := node.StartContainer(ctx, node.ContainerConfig{Config: node.Config{
		Name: "vk", Binary: "valkey-server", FakeClock: true, Proxy: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := n.NewClient()
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "valkey_version:") {
		t.Fatalf("INFO server of the Valkey container names no valkey_version:\n%s", info)
	}
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.JumpClock(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if after, _ := c.Time(ctx).Result(); after.Sub(before) < 59*time.Minute {
		t.Fatalf("TIME moved by %v after a 1h jump", after.Sub(before))
	}
}
