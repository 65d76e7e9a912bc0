// Package slots chooses which of a semaphore's slots an attempt tries: it
// counts, in one read-only round, the nodes that hold each slot (Census),
// keeps the slots a majority may still grant (Free), and fills a request
// of several permits from them (Choose).
//
// The package imports internal/round (the round), internal/nodescript (the
// census script) and internal/lease (the slots' keys); never the root
// package, which builds its public errors from the tally Census returns.
package slots

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Census asks every node which of the k slots of the semaphore called name
// it holds, in one read-only round decided as a lock attempt is. held[i]
// is how many of the nodes that granted the read hold slot i; it is nil
// unless the round was won. The tally is nil on a closed engine (err then
// says so); otherwise err is the round's (ctx's, when it ended first).
func Census(ctx context.Context, rounds *round.Engine, prefix, name string, k int) (held []int, t *round.Tally, err error) {
	keys := make([]any, k)
	for i := range keys {
		keys[i], _, _ = lease.LockKeys(prefix, lease.SlotName(name, i))
	}
	call := nodescript.NewCall(nodescript.Census, keys)
	var mu sync.Mutex
	count := make([]int, k)
	op := func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		on, err := call.Run(ctx, node).Int64Slice()
		if err != nil || len(on) != k {
			return round.NodeFailed, 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, h := range on {
			if h != 0 {
				count[i]++
			}
		}
		return round.NodeGranted, 0, nil
	}
	t, err = rounds.Run(ctx, round.Spec{Name: "census", Op: op}, (*round.Tally).Decided, nil)
	if t == nil || err != nil || !t.Won() {
		return nil, t, err
	}
	// A node's reply may still be counted after Run returned: copy under
	// the lock.
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(count), t, nil
}

// Free returns the slots other than tried (-1: none), in order from tried
// on, that a majority of nodes nodes may still grant: those held on at
// most nodes - majority of them. (Counting the free ones among the nodes
// that answered would pass over a slot this client just released, its
// release still on its way to one of them.)
func Free(held []int, nodes, tried int) []int {
	k := len(held)
	most := nodes - round.Majority(nodes)
	var out []int
	for j := range k {
		if i := (tried + 1 + j) % k; i != tried && held[i] <= most {
			out = append(out, i)
		}
	}
	return out
}

// Choose picks n of the k slots, sorted: from free, in random order, then,
// if too few look free, others at random, so that a waiter joins the line
// or finds the ones the census missed. free is reordered.
func Choose(free []int, n, k int) []int {
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	chosen := free[:min(n, len(free)):min(n, len(free))]
	for _, i := range rand.Perm(k) {
		if len(chosen) == n {
			break
		}
		if !slices.Contains(chosen, i) {
			chosen = append(chosen, i)
		}
	}
	slices.Sort(chosen)
	return chosen
}
