package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/procguard"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// exec exits 75 when "the lock was lost while CMD ran; CMD may have
// overlapped another holder". It learnt that only from a failed extension
// or the validity's end: when the lock vanished from the nodes (a node's
// clock jumped, keys evicted or deleted) and the child ended before the
// next extension, the final Unlock found the lock gone (ErrExpired) and
// exec ignored it (holdWhileRunning's deferred Unlock drops its error):
// the child's 0 came back, and cron reported a clean run that may have
// overlapped another host's.
//
// Replay: TTL 3 s (first extension at 1 s); the child sleeps 0.5 s; the
// lock's keys are deleted on every node as soon as exec holds it.
//
// On today's code (5e7ef93):
//
//	edges6_test.go:67: exit 0 (<nil>), want 75: the lock was gone from every node before the child ended (Unlock finds it expired)
func TestExecExits75WhenUnlockFindsTheLockGone(t *testing.T) {
	g, urls := startNodes(t)
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"exec", "--nodes", urls, "--ttl", "3s", "gone", "--",
			"sleep", "0.5"}, nil)
	}()
	var clients []*redis.Client
	for _, n := range g {
		clients = append(clients, n.NewClient())
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	ctx := context.Background()
	held := false
	for deadline := time.Now().Add(5 * time.Second); !held && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		held = true
		for _, c := range clients {
			held = held && c.Exists(ctx, "redlock:{gone}").Val() == 1
		}
	}
	if !held {
		t.Fatalf("exec did not take the lock on every node: %v", <-done)
	}
	for _, c := range clients { // the keys vanish, as if the nodes' clocks jumped
		c.Del(ctx, "redlock:{gone}")
	}
	err := <-done
	if code := exitCode(err); code != 75 {
		t.Fatalf("exit %d (%v), want 75: the lock was gone from every node before the child ended "+
			"(Unlock finds it expired)", code, err)
	}
}

// sigtermFileEnv names the file in which TestHelperRecordsSIGTERM, run as
// exec's child, writes when it got SIGTERM (Unix ns).
const sigtermFileEnv = "REDLOCK_TEST_SIGTERM_FILE"

// TestHelperRecordsSIGTERM is not a test: it is the child of
// TestExecSignalsTheChildBeforeTheValidityEnds (this test binary, run
// again). It writes "<file>.ready" once it listens for SIGTERM, and the
// wall-clock time at which SIGTERM arrived to the file.
func TestHelperRecordsSIGTERM(t *testing.T) {
	path := os.Getenv(sigtermFileEnv)
	if path == "" {
		t.Skip("the child of TestExecSignalsTheChildBeforeTheValidityEnds")
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	if err := os.WriteFile(path+".ready", nil, 0o600); err != nil {
		os.Exit(3)
	}
	select {
	case <-sigs:
		at := time.Now().UnixNano()
		if err := os.WriteFile(path, []byte(strconv.FormatInt(at, 10)), 0o600); err != nil {
			os.Exit(3)
		}
	case <-time.After(30 * time.Second):
	}
	os.Exit(0)
}

// hangExtensions holds every extension of the locks whose key begins with
// prefix until its context ends: the node never answers it. An extension
// is the only script call with the lock key as its only key.
type hangExtensions struct{ prefix string }

// isExtension tells an Extend's script call (EVALSHA or EVAL, digest or
// source, numkeys, keys..., value, TTL): the unfenced one has one key, and
// no other script of the library has so few; the fenced one four (the lock
// key, the node's id marker, its longest TTL in use and the name's H), the
// third of which no other four-key script passes there.
func isExtension(a []any) bool {
	return len(a) >= 9 && a[2] == "4" && strings.HasSuffix(fmt.Sprint(a[5]), ":fence:max-ttl") ||
		len(a) >= 6 && a[2] == "1"
}

func (h hangExtensions) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h hangExtensions) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h hangExtensions) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); isExtension(a) && strings.HasPrefix(fmt.Sprint(a[3]), h.prefix) {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

// exec sends its child SIGTERM "at the latest when the validity ends, even
// while an extension is still waiting for the nodes". The validity's end
// (Until) is the last instant the holder may rely on the lock, so the child
// must be signalled strictly before it; exec signalled it from l.Done(),
// which closes at Until or after (as Do's fn, do_margin_test.go).
//
// Replay: every extension hangs on every node until its context ends (the
// round's patience, 988 ms after it began at TTL/3, past the validity end
// at 988 ms); the child is this test binary (TestHelperRecordsSIGTERM), which
// notes the wall-clock time SIGTERM reached it. Four runs; in every one it
// must be before Until, taken on the same wall clock.
//
// On today's code (5e7ef93):
//
//	edges6_test.go:185: run 0: the child got SIGTERM 744.497µs after the validity ended
//	edges6_test.go:185: run 1: the child got SIGTERM 1.220312ms after the validity ended
//	edges6_test.go:185: run 2: the child got SIGTERM 665.64µs after the validity ended
//	edges6_test.go:185: run 3: the child got SIGTERM 524.377µs after the validity ended
//	edges6_test.go:189: 4 of 4 runs: the child was signalled at or after the validity's end
func TestExecSignalsTheChildBeforeTheValidityEnds(t *testing.T) {
	g, _ := startNodes(t)
	const ttl = time.Second
	var clients []redis.UniversalClient
	for _, n := range g {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		rc.AddHook(hangExtensions{prefix: "redlock:{sig-"})
		clients = append(clients, rc)
	}
	t.Cleanup(func() { node.CloseClients(clients) })
	a, err := redlock.New(clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	dir := t.TempDir()
	const runs = 4
	late := 0
	for run := range runs {
		file := filepath.Join(dir, strconv.Itoa(run))
		t.Setenv(sigtermFileEnv, file)
		child := []string{os.Args[0], "-test.run=^TestHelperRecordsSIGTERM$"}
		guard, err := procguard.Start(child)
		if err != nil {
			t.Fatal(err)
		}
		l, err := a.TryLock(ctx, fmt.Sprintf("sig-%d", run))
		if err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(time.Until(l.Until())) // on the wall clock too
		err = holdWhileRunning(ctx, l, guard, child, holding{ttl: ttl, grace: 2 * time.Second})
		if code := exitCode(err); code != 75 {
			t.Errorf("run %d: exit %d (%v), want 75 (lock lost)", run, code, err)
		}
		if _, err := os.Stat(file + ".ready"); err != nil {
			t.Fatalf("run %d: the child did not start listening for SIGTERM in time: %v", run, err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("run %d: the child recorded no SIGTERM: %v", run, err)
		}
		ns, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Unix(0, ns).Sub(until); d >= 0 {
			late++
			t.Errorf("run %d: the child got SIGTERM %v after the validity ended", run, d)
		}
	}
	if late > 0 {
		t.Errorf("%d of %d runs: the child was signalled at or after the validity's end", late, runs)
	}
}
