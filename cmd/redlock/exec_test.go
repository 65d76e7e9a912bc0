package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/procguard"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	procguard.Main() // exec's guardian is this test binary
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if binDir != "" {
			os.RemoveAll(binDir)
		}
	}))
}

// startNodes starts three nodes and provisions them, as a deployment does
// once.
func startNodes(t *testing.T) (node.Group, string) {
	t.Helper()
	g, urls := startFreshNodes(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"provision", "--nodes", urls}, &out); err != nil {
		t.Fatalf("provision: %v\n%s", err, out.String())
	}
	return g, urls
}

// startFreshNodes starts three nodes nobody has provisioned.
func startFreshNodes(t *testing.T) (node.Group, string) {
	t.Helper()
	g, err := node.StartProcesses(context.Background(), 3, node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	urls := make([]string, len(g))
	for i, n := range g {
		urls[i] = "redis://" + n.Addr()
	}
	return g, strings.Join(urls, ",")
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestExecPassesTokenAndExitCode(t *testing.T) {
	_, urls := startNodes(t)
	err := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "1s", "job", "--",
		"sh", "-c", `test "$REDLOCK_NAME" = job && test "$REDLOCK_TOKEN" -gt 0 && exit 3`}, nil)
	if code := exitCode(err); code != 3 {
		t.Fatalf("exit code %d (%v), want the child's 3", code, err)
	}
}

func TestExecRunsOnExactlyOneHost(t *testing.T) {
	_, urls := startNodes(t)
	var wg sync.WaitGroup
	var first error
	wg.Go(func() {
		first = run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "2s", "cron", "--", "sleep", "1"}, nil)
	})
	time.Sleep(300 * time.Millisecond)
	second := run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "2s", "cron", "--", "true"}, nil)
	wg.Wait()
	if code := exitCode(second); code != 73 {
		t.Errorf("second host: exit %d (%v), want 73 (lock held)", code, second)
	}
	if first != nil {
		t.Errorf("first host: %v", first)
	}
}

func TestExecStopsTheChildWhenTheLockIsLost(t *testing.T) {
	g, urls := startNodes(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "600ms", "--grace", "1s",
			"lost", "--", "sleep", "10"}, nil)
	}()
	time.Sleep(300 * time.Millisecond)
	for _, n := range g { // the keys vanish, as if a node's clock jumped
		c := n.NewClient()
		c.Del(context.Background(), "redlock:{lost}")
		c.Close()
	}
	err := <-done
	if code := exitCode(err); code != 75 {
		t.Fatalf("exit %d (%v), want 75 (lock lost)", code, err)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("the child ran for %v after the lock was lost", took)
	}
}

// hangSecondExtension fails the first extension of the lock key at once on
// every node, and makes every later one hang until its node timeout. An
// extension is the only script call with the lock key as its only key.
type hangSecondExtension struct {
	key     string
	extends *atomic.Int32
}

func (h hangSecondExtension) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h hangSecondExtension) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h hangSecondExtension) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); isExtension(a) && a[3] == h.key {
			err := errors.New("test: link cut")
			if h.extends.Add(1) > 3 {
				<-ctx.Done()
				err = ctx.Err()
			}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// With a node timeout near TTL/2, exec's second extension hangs from 2/3
// TTL past the validity end. The child must be stopped before another
// client can take the lock (issue 11, item 4): exec used to wait for the
// extension before it looked at the validity.
func TestExecStopsTheChildAtTheValidityEndWhileAnExtensionHangs(t *testing.T) {
	g, _ := startNodes(t)
	const ttl, timeout = 2 * time.Second, 900 * time.Millisecond
	// The drift allowance (102 ms) separates the validity end from the
	// earliest moment the keys can expire.
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(timeout), redlock.WithDriftFactor(0.05)}
	hook := hangSecondExtension{key: "redlock:{job}", extends: new(atomic.Int32)}
	var hooked, plain []redis.UniversalClient
	for _, n := range g {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		rc.AddHook(hook)
		hooked, plain = append(hooked, rc), append(plain, n.NewClient())
	}
	t.Cleanup(func() { node.CloseClients(hooked); node.CloseClients(plain) })
	a, err := redlock.New(hooked, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := redlock.New(plain, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	// The child notes the SIGTERM in a file before it exits.
	marker := filepath.Join(t.TempDir(), "terminated")
	child := []string{"sh", "-c", `trap 'echo > "$0"; kill $!; exit 0' TERM; sleep 10 & wait`, marker}
	done := make(chan error, 1)
	guard, err := procguard.Start(child)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- holdWhileRunning(ctx, l, guard, child, holding{ttl: ttl, grace: time.Second}) }()
	var signalled, got bool
	for deadline := time.Now().Add(3 * ttl); !got && time.Now().Before(deadline); {
		if lb, err := b.TryLock(ctx, "job"); err == nil {
			_, err := os.Stat(marker)
			signalled, got = err == nil, true
			lb.Unlock(ctx)
		}
		time.Sleep(2 * time.Millisecond)
	}
	err = <-done
	if code := exitCode(err); code != 75 {
		t.Errorf("exit %d (%v), want 75 (lock lost)", code, err)
	}
	if !got {
		t.Fatal("B never got the lock")
	}
	if !signalled {
		t.Error("B got the lock before A's child was signalled")
	}
}
