package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

func TestTickName(t *testing.T) {
	at := time.Date(2026, 11, 22, 19, 7, 41, 5e8, time.FixedZone("CET", 3600))
	for d, want := range map[time.Duration]string{
		2 * time.Second: "job:20261122T180740Z", time.Minute: "job:20261122T180700Z",
		5 * time.Minute: "job:20261122T180500Z", 24 * time.Hour: "job:20261122T000000Z",
	} {
		if got, err := tickName("job", d, at); err != nil || got != want {
			t.Errorf("tick %v: %q, %v; want %q", d, got, err, want)
		}
	}
	for _, d := range []time.Duration{0, 500 * time.Millisecond, 7 * time.Minute, 48 * time.Hour} {
		if _, err := tickName("job", d, at); err == nil {
			t.Errorf("tick %v accepted", d)
		}
	}
}

// Three hosts run the same cron entry; cron starts them up to 1.2 s apart
// within 2 s ticks, and the job takes far less than that spread. With a
// fixed name and a release at the end, a late host found the lock free
// and ran the job again; when all tried at once, split votes left some
// ticks without a run (issue 14). With a name per tick, never released,
// exactly one host runs each tick and the others exit 73.
func TestExecNamePerTickRunsExactlyOnceEveryTick(t *testing.T) {
	_, urls := startNodes(t)
	const hosts, ticks, tick, spread = 3, 4, 2 * time.Second, 1200 * time.Millisecond
	dir := t.TempDir()
	job := []string{"sh", "-c", `echo "$REDLOCK_TOKEN $(date +%T.%N)" >> "$0/$REDLOCK_NAME"`, dir}
	codes := make([][]int, ticks)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := range ticks {
		// 50 ms into the next tick, as cron starts a little after the minute.
		time.Sleep(time.Until(time.Now().Truncate(tick).Add(tick + 50*time.Millisecond)))
		for range hosts {
			offset := rand.N(spread)
			wg.Go(func() {
				time.Sleep(offset)
				// A node timeout far above the 50 ms default: on a loaded
				// machine a fresh client's calls outlasted it, TryLock
				// found no quorum and the host exited 69, an outage by
				// the client's own standard, not this test's subject.
				err := run(context.Background(), append([]string{"exec", "--nodes", urls, "--ttl", "2s", "--node-timeout", "500ms",
					"--name-per-tick", tick.String(), "--hold-for", "1500ms", "report", "--"}, job...), nil)
				mu.Lock()
				codes[k] = append(codes[k], exitCode(err))
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	runs, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != ticks {
		t.Errorf("%d tick names ran, want %d", len(runs), ticks)
	}
	for _, r := range runs {
		b, _ := os.ReadFile(filepath.Join(dir, r.Name()))
		if n := strings.Count(string(b), "\n"); n != 1 {
			t.Errorf("%s ran %d times, want once:\n%s", r.Name(), n, b)
		}
	}
	for k, cs := range codes {
		ran, skipped := 0, 0
		for _, c := range cs {
			switch c {
			case 0:
				ran++
			case 73:
				skipped++
			}
		}
		if ran != 1 || skipped != hosts-1 {
			t.Errorf("tick %d: exit codes %v, want one 0 and %d times 73", k, cs, hosts-1)
		}
	}
}

// delayFirstAcquire holds back a client's first call about key on every
// node but its own, so that three clients that start together each take
// one node first: a split vote nobody wins.
type delayFirstAcquire struct {
	key   string
	delay time.Duration
	once  *sync.Once
}

func (h delayFirstAcquire) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h delayFirstAcquire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h delayFirstAcquire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for _, a := range cmd.Args() {
			if a == h.key {
				h.once.Do(func() { time.Sleep(h.delay) })
				break
			}
		}
		return next(ctx, cmd)
	}
}

// The split vote as a replay: each host's first attempt is granted by its
// own node only. A single TryLock left the tick without a run.
func TestTickLockRetriesASplitVote(t *testing.T) {
	g, _ := startNodes(t)
	const name = "report:20261122T180700Z"
	var clients []*redlock.Client
	for i := range g {
		var rcs []redis.UniversalClient
		for j, n := range g {
			rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
			if j != i {
				rc.AddHook(delayFirstAcquire{key: "redlock:{" + name + "}", delay: 200 * time.Millisecond, once: new(sync.Once)})
			}
			rcs = append(rcs, rc)
		}
		t.Cleanup(func() { node.CloseClients(rcs) })
		c, err := redlock.New(rcs, redlock.WithTTL(5*time.Second), redlock.WithNodeTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	start := make(chan struct{})
	for i, c := range clients {
		wg.Go(func() {
			<-start
			_, errs[i] = tryLockContended(context.Background(), c, name, 3*time.Second)
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, redlock.ErrLocked):
			t.Errorf("host %d: %v, want ErrLocked or the lock", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d hosts won the tick, want exactly 1 (errors %v)", won, errs)
	}
}
