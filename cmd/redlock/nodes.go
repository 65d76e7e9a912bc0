package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// dialNodes parses redis:// and rediss:// URLs. A URL without a password
// takes REDLOCK_PASSWORD, so secrets stay out of the command line.
func dialNodes(list string) ([]redis.UniversalClient, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("no nodes: give --nodes or REDLOCK_NODES")
	}
	var clients []redis.UniversalClient
	for _, u := range strings.Split(list, ",") {
		opt, err := redis.ParseURL(strings.TrimSpace(u))
		if err != nil {
			return nil, fmt.Errorf("node %q: %w", u, err)
		}
		if opt.Password == "" {
			opt.Password = os.Getenv("REDLOCK_PASSWORD")
		}
		opt.ContextTimeoutEnabled = true
		clients = append(clients, redis.NewClient(opt))
	}
	return clients, nil
}

// nodeFlags adds the flags every subcommand shares: --nodes and
// --key-prefix.
func nodeFlags(fs *flag.FlagSet) (nodes, prefix *string) {
	nodes = fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	prefix = fs.String("key-prefix", "redlock", "the clients' key prefix")
	return nodes, prefix
}
