package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// Review of issue 23, 2 (afterOwn): an attempt's call on a node waits for
// every own release or rollback of the name in flight there, and a
// rollback's "call" lasts until retryRelease ends: after a broken link,
// retries with pauses doubling from a node timeout up to TTL/4, for up to
// a TTL. So once a node's link was broken during a lost attempt, and has
// come back, this client's next attempts on that name do not reach the
// node until the rollback's next retry (seconds later); the round gives up
// on the node as silent (NodeTimedOut) and TryLock fails although the node
// is up, answering, and would grant. Before afterOwn the attempt was sent
// at once and granted.
//
// The forced order, on three real nodes: node 0's link is cut throughout
// (a node down); node 2's link is cut for one TryLock, which therefore
// loses, and stays cut until its rollback there has failed 6 times (the
// next retry is 3.2 s away); then node 2's link is back, and the same
// client's TryLock on the name needs nodes 1 and 2, both up.
func TestReviewRollbackRetryHoldsBackARecoveredNode(t *testing.T) {
	cl := startCluster(t, 3)
	var down atomic.Bool
	var rollbackFails atomic.Int32
	node2 := &faultHook{before: func(s string) error {
		if !down.Load() {
			return nil
		}
		if strings.HasPrefix(s, "release") && rollbackFails.Add(1) >= 8 {
			defer down.Store(false) // the link is back after this failure
		}
		return errLinkCut
	}}
	c := cl.actor(t, []*faultHook{cut(), nil, node2}, redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithTTL(40*time.Second))
	ctx := context.Background()
	// Pass the node list check with nodes 1 and 2.
	l, err := c.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	if _, err := c.TryLock(ctx, "review-avail"); err == nil {
		t.Fatal("TryLock won with nodes 0 and 2 cut")
	}
	for down.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	// Node 2 answers again; the rollback's next retry there is 3.2 s away.
	t0 := time.Now()
	l, err = c.TryLock(ctx, "review-avail")
	if l != nil {
		t.Logf("took %v: %+v", time.Since(t0), l.Nodes())
	}
	if err != nil {
		t.Fatalf("TryLock with nodes 1 and 2 up and nobody holding the name: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Review of issue 23, 2 (WithMaxOutage vs the queue): a Lock that gives up
// on an outage must leave the lock's queue on every node, including the
// nodes that were paused while it waited, whose acquisition calls (which
// enqueue the waiter) were still in their socket buffers. Forced order:
// nodes 1 and 2 of three paused (SIGSTOP) for the whole Lock, which gives
// up after 1 s; then they resume, and the queue keys are read on every
// node.
func TestReviewOutageGiveUpLeavesTheQueue(t *testing.T) {
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

// Review of issue 23, 2 (ctx-cut errors): a TryLock whose ctx is cancelled
// after a majority granted round 1 but before the commit (round 2) must
// leave nothing locked, match context.Canceled (not DeadlineExceeded), and
// report no node as having committed. Forced order: a hook on every node
// cancels the caller's ctx as the commit call is about to go out.
func TestReviewCtxCutBeforeCommitLeavesNothingLocked(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var armed atomic.Bool
	hook := func() *faultHook {
		return &faultHook{before: func(s string) error {
			if armed.Load() && s == "commit" {
				cancel()
			}
			return nil
		}}
	}
	c := cl.actor(t, []*faultHook{hook(), hook(), hook()}, redlock.WithNodeTimeout(50*time.Millisecond))
	l, err := c.TryLock(context.Background(), "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	l, err = c.TryLock(ctx, "review-cut")
	if err == nil {
		l.Unlock(context.Background())
		t.Fatal("TryLock won although its ctx was cancelled before the commit")
	}
	t.Logf("TryLock: %v", err)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock cut by a cancel: %v, want a *QuorumError matching context.Canceled only", err)
	}
	if errors.Is(err, redlock.ErrLocked) {
		t.Errorf("a cancel is reported as contention: %v", err)
	}
	if vals := cl.holdersOnceReleased(t, "review-cut"); !slices.Equal(vals, make([]string, len(vals))) {
		t.Fatalf("a cut attempt left the lock set on the nodes: %q", vals)
	}
	l, err = cl.newClient(t).TryLock(context.Background(), "review-cut")
	if err != nil {
		t.Fatalf("another client after the cut attempt: %v", err)
	}
	l.Unlock(context.Background())
}

// Review of issue 23, 2 (afterOwn vs ctx): this client's release of the
// name hangs on two paused nodes of three (SIGSTOP), so the Unlock fails
// and the next TryLock's calls on them wait for that release (afterOwn),
// which lasts the round's patience (5 s). The TryLock must still end at
// the caller's deadline, with a Kind and matching DeadlineExceeded.
func TestReviewAfterOwnEndsAtTheCallersDeadline(t *testing.T) {
	cl := startCluster(t, 3)
	c := cl.newClient(t, redlock.WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "review-hung")
	if err != nil {
		t.Fatal(err)
	}
	resume := cl.pause(t, 0, 2)
	uctx, ucancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ucancel()
	if err := l.Unlock(uctx); err == nil {
		t.Fatal("Unlock won with two nodes of three paused")
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		l, err := c.TryLock(tctx, "review-hung")
		if l != nil {
			l.Unlock(ctx)
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(4 * time.Second):
		resume()
		t.Fatal("TryLock with a 300 ms deadline still waits 4 s later, behind its own release on the paused nodes")
	}
	t.Logf("TryLock: %v", err)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("TryLock: %v, want a *QuorumError, ErrUnavailable, matching DeadlineExceeded", err)
	}
	resume()
}
