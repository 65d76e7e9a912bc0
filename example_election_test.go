package redlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
)

// One scheduler acting at a time: Run campaigns, runs the function while
// this process leads, and passes the term to the storage it writes as a
// fencing token.
func ExampleElection_Run() {
	c, stop := familyClient()
	defer stop()
	ctx := context.Background()
	e, _ := c.Election("scheduler")
	store := &fence.Memory{}
	errDone := errors.New("scheduled")
	err := e.Run(ctx, "host-a", func(ctx context.Context, ld *redlock.Leadership) error {
		info, err := e.Leader(ctx)
		if err != nil {
			return err
		}
		fmt.Println("leader:", info.Value, "term matches:", info.Term == ld.Term())
		// Every write carries the term: a deposed leader's is refused.
		if err := store.Do(ctx, "jobs", ld.Term(), ld.ID(), func() error { return nil }); err != nil {
			return err
		}
		return errDone // one round of scheduling, for the example
	})
	fmt.Println(errors.Is(err, errDone))
	_, err = e.Leader(ctx)
	fmt.Println("after Run:", errors.Is(err, redlock.ErrNoLeader))
	// Output:
	// leader: host-a term matches: true
	// true
	// after Run: true
}
