package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/node"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, p node.Persistence) *node.Process {
	t.Helper()
	n, err := node.StartProcess(context.Background(), node.Config{Name: "t", Persistence: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestRestartKeepsOrLosesData(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		p    node.Persistence
		wipe bool
		want bool
	}{
		{node.PersistAOFAlways, false, true},
		{node.PersistAOFEverySec, true, false},
		{node.PersistNone, false, false},
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			n := start(t, tc.p)
			c := n.NewClient()
			defer c.Close()
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := n.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(ctx, "k").Err(); err == nil {
				t.Fatal("GET succeeded on a killed node")
			}
			if tc.wipe {
				if err := n.WipeData(); err != nil {
					t.Fatal(err)
				}
			}
			if err := n.Start(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := c.Exists(ctx, "k").Result()
			if err != nil {
				t.Fatal(err)
			}
			if (got == 1) != tc.want {
				t.Fatalf("key survived restart = %v, want %v", got == 1, tc.want)
			}
		})
	}
}

func TestPauseBuffersCommandsUntilResume(t *testing.T) {
	ctx := context.Background()
	n := start(t, node.PersistNone)
	c := n.NewClient()
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := c.Set(callCtx, "late", "v", 0).Err()
	cancel()
	if err == nil {
		t.Fatal("SET answered by a paused node")
	}
	if err := n.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// The SET the client gave up on was buffered by the kernel and lands now.
	deadline := time.Now().Add(5 * time.Second)
	for c.Exists(ctx, "late").Val() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("buffered SET never landed after resume")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWrongStateAndMissingBinary(t *testing.T) {
	ctx := context.Background()
	n := start(t, node.PersistNone)
	if err := n.Resume(ctx); !errors.Is(err, node.ErrState) {
		t.Fatalf("Resume on a running node: %v, want ErrState", err)
	}
	if err := n.WipeData(); !errors.Is(err, node.ErrState) {
		t.Fatalf("WipeData on a running node: %v, want ErrState", err)
	}
	if err := n.Start(ctx); !errors.Is(err, node.ErrState) {
		t.Fatalf("Start on a running node: %v, want ErrState", err)
	}
	n.Close()
	if err := n.Start(ctx); !errors.Is(err, node.ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
	_, err := node.StartProcess(ctx, node.Config{Binary: "no-such-redis-server"})
	if !errors.Is(err, node.ErrRedisServerMissing) {
		t.Fatalf("missing binary: %v, want ErrRedisServerMissing", err)
	}
}

func TestStartProcesses(t *testing.T) {
	g, err := node.StartProcesses(context.Background(), 3, node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cs := g.NewClients()
	defer node.CloseClients(cs)
	seen := map[string]bool{}
	for i, c := range cs {
		id, err := c.Do(context.Background(), "INFO", "server").Text()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		seen[id] = true
	}
	if len(seen) != 3 {
		t.Fatalf("want 3 distinct servers, got %d", len(seen))
	}
}
