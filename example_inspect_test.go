package redlock_test

import (
	"context"
	"fmt"
)

// What a dashboard shows of a read-write lock: its readers by id, and the
// writer once it holds.
func ExampleRWMutex_Inspect() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	rw, _ := c.RWMutex("catalog")
	r, err := rw.RLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	info, err := rw.Inspect(ctx)
	if err != nil {
		fmt.Println(err) // ErrUnavailable: fewer than a majority answered
		return
	}
	fmt.Println("write-held:", info.Write.Held)
	fmt.Println("readers:", len(info.Readers), "the first is ours:", info.Readers[0].Holder == r.ID())
	r.Unlock(ctx)

	w, _ := rw.Lock(ctx)
	defer w.Unlock(ctx)
	info, _ = rw.Inspect(ctx)
	fmt.Println("write-held:", info.Write.Held, "by ours:", info.Write.Holder == w.ID(), "token:", info.Write.Token == w.Token())
	// Output:
	// write-held: false
	// readers: 1 the first is ours: true
	// write-held: true by ours: true token: true
}

// Who holds a semaphore's permits, how many are free, and who waits.
func ExampleSemaphore_Inspect() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	s, _ := c.Semaphore("exports", 3)
	p, err := s.AcquireN(ctx, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Release(ctx)
	info, err := s.Inspect(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("size stored:", info.Permits, "free:", info.Free, "waiting:", info.Waiting)
	for _, h := range info.Holders {
		fmt.Println("a permit of", len(h.Slots), "slots, ours:", h.Holder == p.ID())
	}
	// Output:
	// size stored: 3 free: 1 waiting: 0
	// a permit of 2 slots, ours: true
}

// A multi-lock's members, each held under the multi-lock's one id.
func ExampleClient_InspectMulti() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	m, err := c.TryLockMulti(ctx, []string{"account:1", "account:2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Unlock(ctx)
	infos, err := c.InspectMulti(ctx, []string{"account:1", "account:2", "account:3"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, info := range infos {
		fmt.Println(info.Name, "held:", info.Held, "by the multi-lock:", info.Holder == m.ID())
	}
	// Output:
	// account:1 held: true by the multi-lock: true
	// account:2 held: true by the multi-lock: true
	// account:3 held: false by the multi-lock: false
}
