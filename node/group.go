package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// Group is a set of nodes started together.
type Group []Node

// StartProcesses starts n redis-server processes in parallel, named n0..n(n-1).
// If any fails to start, the others are closed and the first error returned.
func StartProcesses(ctx context.Context, n int, cfg Config) (Group, error) {
	return startGroup(ctx, n, func(ctx context.Context, name string) (Node, error) {
		c := cfg
		c.Name = name
		return StartProcess(ctx, c)
	})
}

// startGroup starts n nodes in parallel, named n0..n(n-1). If any fails,
// the others are closed and the first error returned.
func startGroup(ctx context.Context, n int, start func(ctx context.Context, name string) (Node, error)) (Group, error) {
	g := make(Group, n)
	eg, ctx := errgroup.WithContext(ctx)
	for i := range n {
		eg.Go(func() error {
			nd, err := start(ctx, fmt.Sprintf("n%d", i))
			if err == nil {
				g[i] = nd
			}
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// Addrs returns the nodes' addresses in order.
func (g Group) Addrs() []string {
	addrs := make([]string, len(g))
	for i, n := range g {
		addrs[i] = n.Addr()
	}
	return addrs
}

// NewClients returns one new client per node, as the lock client takes them.
// The caller closes them (CloseClients).
func (g Group) NewClients() []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(g))
	for i, n := range g {
		cs[i] = n.NewClient()
	}
	return cs
}

// CloseClients closes clients made by NewClients.
func CloseClients(cs []redis.UniversalClient) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Close closes every node that was started; nil entries are skipped.
func (g Group) Close() error {
	var errs []error
	for _, n := range g {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	return errors.Join(errs...)
}
