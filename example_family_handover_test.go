package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock"
)

// A hung reader keeps a read-write lock that a writer waits for: an
// operator revokes every hold of it, the hung reader's next Extend fails,
// and the writer's token is above the reader's, so a read fence refuses
// the hung reader's late reads.
func ExampleRWMutex_Revoke() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	config, _ := c.RWMutex("config")
	hung, err := config.RLock(ctx, redlock.For(time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	rv, err := config.Revoke(ctx)
	if err != nil {
		fmt.Println(err) // ErrUnavailable: too few nodes answered
		return
	}
	fmt.Println("readers revoked:", len(rv.Readers), rv.Readers[0] == hung.ID())
	fmt.Println("its Extend:", errors.Is(hung.Extend(ctx), redlock.ErrExpired))
	w, err := config.TryLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Unlock(ctx)
	fmt.Println("the writer's token is larger:", w.Token() > hung.Token())
	// Output:
	// readers revoked: 1 true
	// its Extend: true
	// the writer's token is larger: true
}

// A permit whose holder crashed with a long TTL: Inspect shows who holds
// the slots, and Revoke releases that permit by its ID for the next
// caller, whose token is above the revoked one's.
func ExampleSemaphore_Revoke() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	s, _ := c.Semaphore("exports", 1)
	crashed, err := s.TryAcquire(ctx, redlock.For(time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	info, err := s.Inspect(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	id := info.Holders[0].Holder // the ID an operator reads off Inspect (or `redlock inspect --permits 1`)
	rv, err := s.Revoke(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("revoked:", rv.Holder == crashed.ID())
	next, err := s.TryAcquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Release(ctx)
	fmt.Println("the next token is larger:", next.Token() > crashed.Token())
	// Output:
	// revoked: true
	// the next token is larger: true
}

// A dispatcher takes a permit and hands it, by its ID, to the worker that
// runs the job: the worker resumes it, keeps it extended, and releases it.
func ExampleSemaphore_Resume() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	s, _ := c.Semaphore("exports", 2)
	p, err := s.TryAcquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	id := p.ID() // handed to the worker with the job, over a trusted channel

	w, err := s.Resume(ctx, id) // in the worker: a Semaphore of the same name and K, on its own client
	if err != nil {
		fmt.Println(err) // ErrExpired: the permit was gone before the worker came
		return
	}
	fmt.Println("the same permit:", w.ID() == p.ID(), w.Slot() == p.Slot(), w.Token() == p.Token())
	fmt.Println("released:", w.Release(ctx) == nil)
	// Output:
	// the same permit: true true true
	// released: true
}
