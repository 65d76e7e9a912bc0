package redlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
)

// familyClient starts five local nodes, provisions them and returns a
// client over them.
func familyClient() (*redlock.Client, func()) {
	nodes, stop := exampleNodes()
	if err := deploy(context.Background(), nodes); err != nil {
		panic(err)
	}
	c, err := redlock.New(nodes, redlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	return c, func() { c.Close(); stop() }
}

// Many readers or one writer, each hold with a token; the store keeps a
// write mark and a read mark (fence.ReadFence).
func ExampleRWMutex() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	store := &fence.Memory{} // the protected service's fence

	config, err := c.RWMutex("config")
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := config.Lock(ctx) // waits for the readers to leave; new readers wait behind it
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("write admitted:", store.Admit(ctx, "config", w.Token(), "writer") == nil)
	if err := w.Downgrade(ctx); err != nil { // keeps the token; no writer can come in between
		fmt.Println(err)
		return
	}
	fmt.Println("reading after downgrade:", w.Reading())
	_ = w.Unlock(ctx)

	r1, _ := config.RLock(ctx)
	r2, _ := config.RLock(ctx) // readers share the lock
	fmt.Println("read admitted:", store.AdmitRead(ctx, "config", r1.Token(), "r1") == nil)
	fmt.Println("a stale writer refused:", store.Admit(ctx, "config", w.Token(), "writer") != nil)
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	// Output:
	// write admitted: true
	// reading after downgrade: true
	// read admitted: true
	// a stale writer refused: true
}

// At most three reports run at once, whichever processes run them; each
// permit is fenced per slot.
func ExampleSemaphore() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()

	reports, err := c.Semaphore("reports", 3) // every client of "reports" must say 3 (or get ErrPermits)
	if err != nil {
		fmt.Println(err)
		return
	}
	var held []*redlock.Permit
	for range 3 {
		p, err := reports.TryAcquire(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		held = append(held, p)
	}
	_, err = reports.TryAcquire(ctx)
	fmt.Println("a fourth:", err != nil)
	_ = held[0].Release(ctx) // p.Name() ("reports#<slot>") and p.Token() go to the fence
	err = reports.Do(ctx, func(ctx context.Context, p *redlock.Permit) error {
		fmt.Println("running on slot", p.Slot() == held[0].Slot())
		return nil
	})
	fmt.Println(err)
	for _, p := range held[1:] {
		_ = p.Release(ctx)
	}
	// Output:
	// a fourth: true
	// running on slot true
	// <nil>
}

// Moving money between two accounts: both names or neither, one token
// that both accounts' fences accept.
func ExampleClient_LockMulti() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	store := &fence.Memory{}

	m, err := c.LockMulti(ctx, []string{"account:7", "account:9"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Unlock(ctx)
	for _, name := range m.Names() {
		fmt.Println(name, "admitted:", store.Admit(ctx, name, m.Token(), "transfer") == nil)
	}
	// Output:
	// account:7 admitted: true
	// account:9 admitted: true
}

// A helper that takes the lock itself, called from code that already holds
// it: Reentrant reenters the lock the context carries, with the same token.
func ExampleReentrant() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()

	err := c.Do(ctx, "ledger", func(ctx context.Context, outer *redlock.Lock) error {
		return post(ctx, c, outer.Token())
	})
	fmt.Println(err)
	// Output:
	// reentered with the same token: true
	// <nil>
}

func post(ctx context.Context, c *redlock.Client, want uint64) error {
	l, err := c.Lock(ctx, "ledger", redlock.Reentrant()) // at once: ctx holds "ledger"
	if err != nil {
		return err
	}
	defer l.Unlock(ctx) // counts down; the outer Do releases
	fmt.Println("reentered with the same token:", l.Token() == want)
	return nil
}
