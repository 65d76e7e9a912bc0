package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// exampleNodes starts five local redis-server processes (the examples run
// them for real) and returns clients for them.
func exampleNodes() ([]redis.UniversalClient, func()) {
	g, err := node.StartProcesses(context.Background(), 5, node.Config{})
	if err != nil {
		panic(err)
	}
	clients := g.NewClients()
	return clients, func() {
		node.CloseClients(clients)
		g.Close()
	}
}

// The README's quick start: provisioning at deploy time, then the
// service, which locks without provisioning anything.
func Example() {
	nodes, stop := exampleNodes() // in production: your go-redis clients for five independent masters
	defer stop()
	if err := deploy(context.Background(), nodes); err != nil {
		fmt.Println(err)
		return
	}
	if err := quickStart(context.Background(), nodes); err != nil {
		fmt.Println(err)
	}
	// Output:
	// wrote invoice with a token: true
	// migrated with a token: true
}

// deploy is the deploy-time step, run once per deployment: `redlock
// provision --nodes ...`, or a one-off program like this one. It needs every
// node of a new deployment; run again on a provisioned one, it changes
// nothing and needs only a majority.
func deploy(ctx context.Context, nodes []redis.UniversalClient) error {
	c, err := redlock.New(nodes)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Provision(ctx)
}

func quickStart(ctx context.Context, nodes []redis.UniversalClient) error {
	c, err := redlock.New(nodes, redlock.WithTTL(10*time.Second))
	if err != nil {
		return err // each bad option has its own error: errors.Is(err, redlock.ErrTTLTooShort)
	}
	defer c.Close()

	if err := lockAndWrite(ctx, c); err != nil {
		return err
	}
	return doMigrate(ctx, c)
}

func lockAndWrite(ctx context.Context, c *redlock.Client) error {
	l, err := c.Lock(ctx, "orders:42") // waits until acquired, ctx ends, or the nodes stay unavailable (WithMaxOutage)
	if err != nil {
		return err // errors.Is(err, context.DeadlineExceeded), redlock.ErrNotProvisioned, ...
	}
	defer l.Unlock(context.Background())
	// l.Token() is the fencing token: send it with every write to the protected store.
	// l.Done() closes when the validity (l.Until()) ends without an Extend.
	return writeInvoice(ctx, l.Token())
}

func doMigrate(ctx context.Context, c *redlock.Client) error {
	return c.Do(ctx, "orders:42", func(ctx context.Context, l *redlock.Lock) error {
		return migrate(ctx, l.Token()) // ctx is cancelled, with cause ErrLockLost, by the time the lock could lapse
	})
}

func writeInvoice(_ context.Context, token uint64) error {
	fmt.Println("wrote invoice with a token:", token > 0)
	return nil
}

func migrate(_ context.Context, token uint64) error {
	fmt.Println("migrated with a token:", token > 0)
	return nil
}

func ExampleClient_Do() {
	nodes, stop := exampleNodes() // five independent masters
	defer stop()

	c, err := redlock.New(nodes, redlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// Once per deployment (at deploy time, or `redlock provision`): give the
	// nodes their fencing identities. It is a no-op once done.
	if err := c.Provision(context.Background()); err != nil {
		panic(err)
	}

	err = c.Do(context.Background(), "migrations", func(ctx context.Context, l *redlock.Lock) error {
		// Runs on one process at a time. The lock is extended while this runs;
		// ctx is cancelled, with cause redlock.ErrLockLost, if it cannot be.
		fmt.Println("migrating under token", l.Token() > 0)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// migrating under token true
	// done: <nil>
}

func ExampleClient_TryLock() {
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

	l, err := c.TryLock(ctx, "report")
	if err != nil {
		// ErrLocked: someone else holds it; ErrUnavailable: too few nodes
		// answered. Either way there is no lock to unlock.
		fmt.Println(err)
		return
	}
	defer l.Unlock(ctx)

	_, err = c.TryLock(ctx, "report")
	fmt.Println(errors.Is(err, redlock.ErrLocked), errors.Is(err, redlock.ErrUnavailable))
	// Output: true false
}

// A holder that was paused past its lease comes back and writes with its
// old token: the store turns it away.
func ExampleLock_Token() {
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
	store := &fence.Memory{} // the protected service's fence

	a, err := c.Lock(ctx, "invoice:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	a.Unlock(ctx) // stands for A's lease running out while A is paused (GC, swap)

	b, err := c.Lock(ctx, "invoice:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Unlock(ctx)
	fmt.Println("B writes:", store.Admit(ctx, "invoice:7", b.Token(), ""))

	err = store.Admit(ctx, "invoice:7", a.Token(), "") // A wakes up
	fmt.Println("A writes:", errors.Is(err, fence.ErrStale))
	// Output:
	// B writes: <nil>
	// A writes: true
}

// An observer sees each node's answer and the timings of every operation;
// package redlockotel turns the same events into OpenTelemetry metrics.
func ExampleWithObserver() {
	nodes, stop := exampleNodes()
	defer stop()
	obs := redlock.ObserverFunc(func(ctx context.Context, ev redlock.Event) {
		granted := 0
		for _, n := range ev.Nodes {
			if n.Outcome == redlock.NodeGranted {
				granted++ // n.Latency is this node's round trip
			}
		}
		fmt.Printf("%s %q: err=%v, granted by at least a majority: %v\n", ev.Op, ev.Name, ev.Err, granted >= 3)
	})
	c, err := redlock.New(nodes, redlock.WithObserver(obs), redlock.WithoutFencing())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.TryLock(ctx, "report")
	if err != nil {
		fmt.Println(err) // the observer saw the failed attempt too
		return
	}
	l.Unlock(ctx)
	// Output:
	// lock "report": err=<nil>, granted by at least a majority: true
	// unlock "report": err=<nil>, granted by at least a majority: true
}

// A Trace reports the protocol's points as they happen, and holds the
// protocol while a callback runs: a test can pause an acquisition between
// its rounds (RoundTwo) or delay one node's calls (NodeCall), to replay a
// fault at an exact point.
func ExampleWithTrace() {
	nodes, stop := exampleNodes()
	defer stop()
	var granted atomic.Int32
	trace := &redlock.Trace{
		AttemptStart: func(name string) { fmt.Printf("attempt on %q\n", name) },
		NodeReply: func(op string, node int, r redlock.NodeResult) {
			if op == "lock" && r.Outcome == redlock.NodeGranted {
				granted.Add(1) // runs before the round counts this reply
			}
		},
		RoundTwo: func(name string, token uint64) {
			fmt.Printf("round 1 won by a majority: %v; committing a token: %v\n", granted.Load() >= 3, token > 0)
		},
	}
	c, err := redlock.New(nodes, redlock.WithTrace(trace))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Provision(ctx); err != nil {
		fmt.Println(err)
		return
	}

	l, err := c.TryLock(ctx, "report")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", l.Token() > 0)
	l.Unlock(ctx)
	// Output:
	// attempt on "report"
	// round 1 won by a majority: true; committing a token: true
	// held: true
}
