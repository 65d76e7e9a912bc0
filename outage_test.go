package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// Lock gives up on an outage (issue 23, 2): replays on real nodes of what
// kept Lock(context.Background()) retrying for ever. Each runs Lock with a
// short bound and no deadline, under a generous watchdog that closes the
// client (so a Lock that never returns fails the test rather than hanging
// it); what is asserted is the error, never how long it took.

// outageBound is the WithMaxOutage of the replays.
const outageBound = time.Second

// lockUnderWatchdog runs c.Lock(context.Background(), name) and returns its
// error, failing the test if Lock has not returned within a minute.
func lockUnderWatchdog(t *testing.T, c *redlock.Client, name string) error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(context.Background(), name)
		if err == nil {
			err = l.Unlock(context.Background())
			if err == nil {
				err = errors.New("test: Lock succeeded")
			}
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Logf("Lock: %v", err)
		return err
	case <-time.After(time.Minute):
		c.Close() // Lock returns ErrClosed, and its goroutine ends
		t.Fatalf("Lock(context.Background()) still retrying after a minute (bound %v): %v", outageBound, <-got)
		return nil
	}
}

// wantOutage checks that err is a *QuorumError of kind, naming every
// node's cause, and saying that Lock gave up on the outage.
func wantOutage(t *testing.T, err, kind error, causes ...string) *redlock.QuorumError {
	t.Helper()
	qe := quorumError(t, err)
	if !errors.Is(err, kind) || qe.Cause != nil {
		t.Fatalf("want kind %v and no cause, got %v (kind %v, cause %v)", kind, err, qe.Kind, qe.Cause)
	}
	if qe.GaveUpAfter < outageBound || !strings.Contains(err.Error(), "gave up after") {
		t.Errorf("the error does not say Lock gave up on the outage (GaveUpAfter %v): %v", qe.GaveUpAfter, err)
	}
	wantCauses(t, qe, causes...)
	return qe
}

// wantCauses checks that every node of qe has an outcome with its cause
// (none is left "no reply"), and that the message holds each of causes.
func wantCauses(t *testing.T, qe *redlock.QuorumError, causes ...string) {
	t.Helper()
	for _, n := range qe.Nodes {
		if n.Outcome == redlock.NodeNoReply || n.Outcome != redlock.NodeGranted && n.Outcome != redlock.NodeRefused && n.Err == nil {
			t.Errorf("node %d: outcome %v with no cause: %v", n.Node, n.Outcome, qe)
		}
	}
	if len(qe.Nodes) == 0 {
		t.Errorf("no node results: %v", qe)
	}
	for _, c := range causes {
		if !strings.Contains(qe.Error(), c) {
			t.Errorf("the error does not name %q: %v", c, qe)
		}
	}
}

func outageClient(t *testing.T, cl *cluster, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	opts = append([]redlock.Option{redlock.WithMaxOutage(outageBound), redlock.WithTTL(time.Second)}, opts...)
	return cl.newClient(t, opts...)
}

func TestLockGivesUpWhenEveryNodeIsDown(t *testing.T) {
	cl := startCluster(t, 5)
	for _, n := range cl.nodes {
		if err := n.Kill(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	err := lockUnderWatchdog(t, outageClient(t, cl), "outage-all")
	wantOutage(t, err, redlock.ErrUnavailable, "connection refused")
}

func TestLockGivesUpWhenAMajorityIsDown(t *testing.T) {
	cl := startCluster(t, 5)
	for _, i := range []int{0, 2, 4} {
		if err := cl.nodes[i].Kill(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	err := lockUnderWatchdog(t, outageClient(t, cl), "outage-majority")
	qe := wantOutage(t, err, redlock.ErrUnavailable, "connection refused")
	if n := countOutcomes(qe.Nodes)[redlock.NodeGranted]; n != 2 {
		t.Errorf("want the two live nodes granted, got %v", qe)
	}
}

func TestLockGivesUpWhenAMajorityIsPaused(t *testing.T) {
	cl := startCluster(t, 5)
	cl.pause(t, 1, 2, 3)
	err := lockUnderWatchdog(t, outageClient(t, cl), "outage-paused")
	wantOutage(t, err, redlock.ErrUnavailable, "timed out")
}

// Replicas whose master cannot be reached keep their data and serve reads,
// but refuse writes with READONLY, as during a failover.
func TestLockGivesUpWhenAMajorityIsReadOnly(t *testing.T) {
	cl := startCluster(t, 5)
	for _, i := range []int{0, 1, 2} {
		// Port 1: nothing listens there, so the replica keeps its data.
		if err := cl.inspect[i].Do(context.Background(), "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	err := lockUnderWatchdog(t, outageClient(t, cl), "outage-readonly")
	wantOutage(t, err, redlock.ErrUnavailable, "READONLY")
}

// A node made a replica of another server is read-only too: here a
// majority are replicas of a sixth server, outside the list, that wants a
// password they lack, so they never sync and keep serving the old data
// (as replicas cut off from their master during a failover do).
func TestLockGivesUpOnReplicasGivenAsMasters(t *testing.T) {
	cl := startCluster(t, 5)
	g, err := node.StartProcesses(context.Background(), 1, node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	master := g[0].NewClient()
	err = master.ConfigSet(context.Background(), "requirepass", "secret").Err()
	master.Close()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(g[0].(*node.Process).DirectAddr(), ":")
	for _, i := range []int{2, 3, 4} {
		if err := cl.inspect[i].Do(context.Background(), "REPLICAOF", host, port).Err(); err != nil {
			t.Fatal(err)
		}
	}
	err = lockUnderWatchdog(t, outageClient(t, cl), "outage-replicas")
	wantOutage(t, err, redlock.ErrUnavailable, "READONLY")
}

// Cluster-mode nodes given as plain clients: every slot is served, so
// single-slot commands work, but the fenced scripts, whose keys span
// slots, get CROSSSLOT every time. That is a configuration error (New
// refuses a ClusterClient with fencing for the same reason): Lock fails at
// once, with ErrFencingNode, named on the nodes that answered.
func TestLockFailsAtOnceOnClusterNodesAsPlainClients(t *testing.T) {
	cl := startNodes(t, 3, node.Config{
		Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}})
	ctx := context.Background()
	for i, in := range cl.inspect {
		if err := in.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	c := outageClient(t, cl)
	perr := c.Provision(ctx)
	t.Logf("Provision: %v", perr)
	err := lockUnderWatchdog(t, c, "outage-cluster")
	qe := quorumError(t, err)
	if !errors.Is(err, redlock.ErrFencingNode) || qe.GaveUpAfter != 0 {
		t.Fatalf("want ErrFencingNode at once, got %v", err)
	}
	// Two CROSSSLOT replies of three decide the round, so the third node
	// may have none (NodeNoReply); every node that did answer names it.
	failed := 0
	for _, n := range qe.Nodes {
		switch {
		case n.Outcome == redlock.NodeNoReply:
		case n.Err != nil && strings.Contains(n.Err.Error(), "CROSSSLOT"):
			failed++
		default:
			t.Errorf("node %d: %v, want CROSSSLOT or no reply: %v", n.Node, n.Outcome, qe)
		}
	}
	if failed < 2 {
		t.Errorf("%d nodes name CROSSSLOT, want a majority: %v", failed, qe)
	}
}

// A node that wants a password and got none closes the connection on any
// command of more than 10 arguments, as every lock script is, with "ERR
// Protocol error: unauthenticated multibulk length" (Redis 7.0, Valkey
// 8.0), not NOAUTH. That is ErrAuth, and Lock gives up at once.
func TestLockFailsAtOnceWithoutThePassword(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run("fenced="+strconv.FormatBool(fenced), func(t *testing.T) {
			cl := startCluster(t, 3)
			for i, in := range cl.inspect {
				// The inspecting connection stays logged in.
				if err := in.ConfigSet(context.Background(), "requirepass", "secret").Err(); err != nil {
					t.Fatalf("node %d: %v", i, err)
				}
			}
			opts := []redlock.Option{redlock.WithMaxOutage(outageBound), redlock.WithTTL(time.Second)}
			if !fenced {
				opts = append(opts, redlock.WithoutFencing())
			}
			c := cl.hookedOn(t, nil, opts...) // its own clients: no logged-in connection
			err := lockUnderWatchdog(t, c, "outage-auth")
			qe := quorumError(t, err)
			if !errors.Is(err, redlock.ErrAuth) || qe.GaveUpAfter != 0 {
				t.Fatalf("want ErrAuth at once, got %v", err)
			}
			wantCauses(t, qe)
		})
	}
}

func TestNewRefusesANegativeMaxOutage(t *testing.T) {
	cl := startCluster(t, 3)
	if _, err := redlock.New(cl.clients, redlock.WithMaxOutage(-time.Second)); !errors.Is(err, redlock.ErrBadMaxOutage) {
		t.Fatalf("want ErrBadMaxOutage, got %v", err)
	}
	c, err := redlock.New(cl.clients, redlock.WithMaxOutage(0))
	if err != nil {
		t.Fatalf("WithMaxOutage(0): %v", err)
	}
	c.Close()
}

// A semaphore's waiting Acquire gives up on an outage as Lock does (issue
// 34): an attempt whose census of the slots finds too few nodes answering
// is lost to the outage there, and does not go on to wait a second round
// on the slots themselves. With 3 of 5 nodes paused and a bound of 2 s it
// gave up after 10 s, where Lock gives up after 5 s: each attempt waited
// out the census and then the take. What is asserted is the rounds sent,
// not the time: after the first attempt (which tries a slot first, as an
// uncontended Acquire does), no attempt sends its take once the census
// went unanswered.
func TestSemaphoreAcquireGivesUpOnAnOutageAsLockDoes(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 5)
	var census, takes atomic.Int32
	count := afterHook(func(_ context.Context, script string) {
		switch {
		case script == "census":
			census.Add(1)
		case strings.HasPrefix(script, "sem-acquire"):
			takes.Add(1)
		}
	})
	c := cl.hookedOn(t, map[int]redis.Hook{0: count},
		redlock.WithMaxOutage(2*time.Second), redlock.WithTTL(time.Second), redlock.WithNodeTimeout(20*time.Millisecond))
	s, err := c.Semaphore("outage-sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 1, 2, 3)
	got := make(chan error, 1)
	go func() {
		p, err := s.AcquireN(context.Background(), 2)
		if err == nil {
			err = errors.Join(errors.New("test: AcquireN succeeded"), p.Release(context.Background()))
		}
		got <- err
	}()
	select {
	case err = <-got:
	case <-time.After(time.Minute):
		c.Close()
		t.Fatalf("AcquireN(context.Background()) still retrying after a minute: %v", <-got)
	}
	qe := quorumError(t, err)
	if !errors.Is(err, redlock.ErrUnavailable) || qe.GaveUpAfter < 2*time.Second {
		t.Fatalf("want ErrUnavailable, given up on the outage: %v", err)
	}
	t.Logf("AcquireN: %v; %d censuses, %d takes sent to node 0", err, census.Load(), takes.Load())
	if census.Load() < 2 {
		t.Fatalf("want several attempts within the bound, got %d censuses", census.Load())
	}
	if takes.Load() != 0 {
		t.Errorf("%d takes sent after censuses that too few nodes answered: each attempt waited two rounds", takes.Load())
	}
}

// Review of issue 23, 2 (WithMaxOutage vs the queue): a Lock that gives up
// on an outage must leave the lock's queue on every node, including the
// nodes that were paused while it waited, whose acquisition calls (which
// enqueue the waiter) were still in their socket buffers. Forced order:
// nodes 1 and 2 of three paused (SIGSTOP) for the whole Lock, which gives
// up after 1 s; then they resume, and the queue keys are read on every
// node.
// Origin: the adversarial review of issue 23 (availability under own releases).
func TestOutageGiveUpLeavesTheQueue(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithMaxOutage(time.Second))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 1, 2)
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err = c.Lock(lctx, "review-queue")
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.GaveUpAfter == 0 || !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("Lock with a majority paused: %v, want ErrUnavailable with GaveUpAfter", err)
	}
	t.Logf("Lock: %v", err)
	resume()
	queue := "redlock:{review-queue}:queue"
	var left []string
	for range 100 { // the leave calls reach the resumed nodes in the background
		left = left[:0]
		for i, rc := range cl.clients {
			for _, k := range []string{queue, queue + ":seen"} {
				n, err := rc.ZCard(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					left = append(left, fmt.Sprintf("node %d %s: %d", i, k, n))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("5 s after the Lock gave up, its waiter is still queued: %v", left)
}
