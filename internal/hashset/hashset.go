// Package hashset is the visited set of the exhaustive models
// (internal/protomodel, internal/familymodel): 128-bit hashes of states
// (hash compaction), 16 bytes a state. A collision would prune a state
// wrongly; its probability is about n^2/2^129 for n states, below 1e-20 for
// 10^9 states.
package hashset

import "runtime"

// Set is a set of 128-bit hashes of states: open addressing, linear probing.
// The pair (0, 0) marks an empty slot (a state hashing to it is taken as
// (0, 1)).
type Set struct {
	slots []uint64 // pairs
	mask  uint64   // slots/2 - 1
	n     int
}

// New returns an empty set.
func New() *Set {
	const initial = 1 << 16
	return &Set{slots: make([]uint64, 2*initial), mask: initial - 1}
}

// Add adds (a, b) and reports whether it was new.
func (h *Set) Add(a, b uint64) bool {
	if a == 0 && b == 0 {
		b = 1
	}
	for i := a & h.mask; ; i = (i + 1) & h.mask {
		x, y := h.slots[2*i], h.slots[2*i+1]
		if x == 0 && y == 0 {
			h.slots[2*i], h.slots[2*i+1] = a, b
			h.n++
			if uint64(h.n)*4 > (h.mask+1)*3 {
				h.grow()
			}
			return true
		}
		if x == a && y == b {
			return false
		}
	}
}

func (h *Set) grow() {
	defer func() {
		// The old table is garbage: give it back now, not when the heap
		// has doubled again (a deep search's table is gigabytes).
		if len(h.slots) >= 1<<24 {
			runtime.GC()
		}
	}()
	old := h.slots
	h.slots = make([]uint64, 2*len(old))
	h.mask = uint64(len(h.slots)/2 - 1)
	for i := 0; i < len(old); i += 2 {
		a, b := old[i], old[i+1]
		if a == 0 && b == 0 {
			continue
		}
		for j := a & h.mask; ; j = (j + 1) & h.mask {
			if h.slots[2*j] == 0 && h.slots[2*j+1] == 0 {
				h.slots[2*j], h.slots[2*j+1] = a, b
				break
			}
		}
	}
}

// Len is the number of hashes in the set.
func (h *Set) Len() int { return h.n }
