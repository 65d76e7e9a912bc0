package slots

import (
	"slices"
	"testing"
)

// Free keeps a slot that a majority may still grant: held on at most
// nodes - majority of the nodes, whether or not they answered.
func TestFreeKeepsTheSlotsAMajorityMayStillGrant(t *testing.T) {
	held := []int{0, 1, 2, 3, 0}
	// 5 nodes: a majority is 3, so a slot held on at most 2 may still be granted.
	if got, want := Free(held, 5, -1), []int{0, 1, 2, 4}; !slices.Equal(got, want) {
		t.Fatalf("Free(%v, 5, -1) = %v, want %v", held, got, want)
	}
	// From tried on, without tried.
	if got, want := Free(held, 5, 1), []int{2, 4, 0}; !slices.Equal(got, want) {
		t.Fatalf("Free(%v, 5, 1) = %v, want %v", held, got, want)
	}
	// 3 nodes: a slot held on one may still be granted, on two not.
	if got, want := Free([]int{1, 2, 0}, 3, -1), []int{0, 2}; !slices.Equal(got, want) {
		t.Fatalf("Free on 3 nodes = %v, want %v", got, want)
	}
}

// Choose returns n distinct slots, sorted, taking every free one it can
// before any other.
func TestChooseTakesFreeSlotsFirstAndFillsWithOthers(t *testing.T) {
	for range 200 {
		got := Choose([]int{5, 2}, 3, 8)
		if len(got) != 3 || !slices.IsSorted(got) || !slices.Contains(got, 5) || !slices.Contains(got, 2) {
			t.Fatalf("Choose([5 2], 3, 8) = %v: want 3 sorted slots with 2 and 5", got)
		}
		if got[0] == got[1] || got[1] == got[2] {
			t.Fatalf("Choose repeated a slot: %v", got)
		}
		one := Choose([]int{1, 4, 6}, 1, 8)
		if len(one) != 1 || !slices.Contains([]int{1, 4, 6}, one[0]) {
			t.Fatalf("Choose([1 4 6], 1, 8) = %v: want one of the free slots", one)
		}
	}
}

// Choose must not write past the free slots it was given into the
// caller's array (the census's slice is the caller's).
func TestChooseLeavesTheCallersSliceBeyondItsLengthAlone(t *testing.T) {
	backing := []int{3, 7, 99, 99}
	free := backing[:2]
	_ = Choose(free, 3, 8)
	if backing[2] != 99 || backing[3] != 99 {
		t.Fatalf("Choose wrote into the caller's array beyond free: %v", backing)
	}
}
