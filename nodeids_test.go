package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quorumlock/redlock"
)

// NodeIDs with a node down returns the ids of the others, with
// ErrUnavailable naming the silent node, and never a wrong node list: the
// list is judged against the roster over every listed node. Doctor reads
// ids so; before, it asked only the nodes that answered, and the library
// judged that shorter list against the roster: "the deployment has 3 nodes
// (its roster), the list 2" (TestReviewDoctorWithANodeDownBlamesNoList).
func TestNodeIDsWithANodeDownReturnsTheOthers(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	c := cl.newClient(t)
	before, err := c.NodeIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.nodes[0].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	ids, err := c.NodeIDs(ctx)
	var qe *redlock.QuorumError
	switch {
	case errors.Is(err, redlock.ErrWrongNodeList):
		t.Fatalf("node 0 down: %v, want ErrUnavailable, not a wrong list", err)
	case !errors.Is(err, redlock.ErrUnavailable) || !errors.As(err, &qe):
		t.Fatalf("node 0 down: %v, want a *QuorumError of Kind ErrUnavailable", err)
	case qe.Nodes[0].Outcome == redlock.NodeGranted:
		t.Errorf("node 0 down, yet its outcome is %v", qe.Nodes[0].Outcome)
	}
	want := slices.Clone(before)
	want[0] = -1
	if !slices.Equal(ids, want) {
		t.Errorf("ids with node 0 down: %v, want %v (before: %v)", ids, want, before)
	}
}
