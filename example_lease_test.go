package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock"
)

// A lock taken for longer than the client's TTL, extended to a shorter
// TTL, and inspected as a dashboard would.
func ExampleFor() {
	nodes, stop := exampleNodes()
	defer stop()
	c, err := redlock.New(nodes, redlock.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Provision(ctx); err != nil { // once per deployment
		fmt.Println(err)
		return
	}

	l, err := c.Lock(ctx, "nightly-report", redlock.For(time.Minute)) // this lock only: a minute
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Unlock(ctx)
	fmt.Println("held for about a minute:", time.Until(l.Until()) > 50*time.Second)

	// Done early: keep it 5 seconds from now instead (Extend may shorten).
	if err := l.Extend(ctx, redlock.For(5*time.Second)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("now within 5s:", time.Until(l.Until()) <= 5*time.Second)

	// A TTL is checked as WithTTL checks it, before anything is sent.
	_, err = c.TryLock(ctx, "nightly-report", redlock.For(time.Millisecond))
	fmt.Println(err)
	// Output:
	// held for about a minute: true
	// now within 5s: true
	// redlock: TTL too short: For(1ms) is below the minimum 10ms; with node timeout 50ms and drift factor 0.01, the shortest TTL that works is 104ms
}

// Inspect, for a dashboard or a runbook: is the name held, for how long,
// under which token. It takes no lock; what it says may be stale at once.
func ExampleClient_Inspect() {
	nodes, stop := exampleNodes()
	defer stop()
	c, err := redlock.New(nodes)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Provision(ctx); err != nil { // once per deployment
		fmt.Println(err)
		return
	}
	l, err := c.TryLock(ctx, "orders:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Unlock(ctx)

	info, err := c.Inspect(ctx, "orders:42")
	if err != nil {
		fmt.Println(err) // ErrUnavailable: fewer than a majority answered; info.Nodes says why
		return
	}
	fmt.Println("held:", info.Held)
	fmt.Println("the holder's token:", info.Token == l.Token())
	fmt.Println("remaining, at most the TTL:", info.Remaining > 0 && info.Remaining <= redlock.DefaultTTL)
	for _, n := range info.Nodes {
		if n.Err != nil {
			fmt.Printf("node %d: %v\n", n.Node, n.Err)
		}
	}
	// Output:
	// held: true
	// the holder's token: true
	// remaining, at most the TTL: true
}

// A holder that hangs with its lock: an operator revokes it, the holder's
// next Extend fails, and the next holder's token is above the revoked one's,
// so a fence refuses the revoked holder's late writes.
func ExampleClient_Revoke() {
	nodes, stop := exampleNodes()
	defer stop()
	c, err := redlock.New(nodes)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Provision(ctx); err != nil { // once per deployment
		fmt.Println(err)
		return
	}
	hung, err := c.TryLock(ctx, "orders:42", redlock.For(time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}

	rv, err := c.Revoke(ctx, "orders:42")
	if err != nil {
		fmt.Println(err) // ErrUnavailable: too few nodes answered; those that did were revoked
		return
	}
	fmt.Println("revoked the hung holder:", rv.Holder == hung.ID())
	fmt.Println("its Extend:", errors.Is(hung.Extend(ctx), redlock.ErrExpired))

	next, err := c.TryLock(ctx, "orders:42")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Unlock(ctx)
	fmt.Println("the next token is larger:", next.Token() > hung.Token())
	// Output:
	// revoked the hung holder: true
	// its Extend: true
	// the next token is larger: true
}

// A scheduler takes the lock and hands the job, with the lock's ID, to a
// worker process, which resumes the hold, extends it while it runs, and
// releases it.
func ExampleClient_Resume() {
	nodes, stop := exampleNodes()
	defer stop()
	scheduler, err := redlock.New(nodes)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer scheduler.Close()
	ctx := context.Background()
	if err := scheduler.Provision(ctx); err != nil { // once per deployment
		fmt.Println(err)
		return
	}
	l, err := scheduler.TryLock(ctx, "report:daily")
	if err != nil {
		fmt.Println(err)
		return
	}
	id := l.ID() // handed to the worker with the job, over a trusted channel

	worker, err := redlock.New(nodes) // in the worker's process
	if err != nil {
		fmt.Println(err)
		return
	}
	defer worker.Close()
	w, err := worker.Resume(ctx, "report:daily", id)
	if err != nil {
		fmt.Println(err) // ErrExpired: the hold was gone before the worker came
		return
	}
	fmt.Println("the same hold:", w.ID() == l.ID(), w.Token() == l.Token())
	fmt.Println("released:", w.Unlock(ctx) == nil)
	// Output:
	// the same hold: true true
	// released: true
}
