package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/quorumlock/redlock"
)

const revokeUsage = `usage: redlock revoke [flags] NAME

Releases the lock NAME (a mutex: Lock, exec) whoever holds it, as its holder's Unlock would: for a
holder that cannot release it (a hung process whose keep-alive still runs, a lock with a long TTL
whose holder crashed). The revoked holder can no longer extend the lock, and with fencing the next
holder's token is above its own, so a fence refuses its late writes; without a fence nothing stops
them: revoke only a holder you know has stopped, or one behind a fence (docs/operations.md).

First it watches the lock for --watch: a holder that extends the lock meanwhile is alive, and revoke
refuses it (exit 73) unless --force. A holder extends every third of its TTL: give --watch more than
that to see it. Only the holder watched is revoked: if another took the lock meanwhile, revoke refuses
(exit 73) and touches nothing; if the lock was or became free, nothing is revoked.

Exit codes: 0 revoked, or the lock was free; 73 the holder extended the lock while watched, or the
lock changed hands (--force revokes it anyway); 69 fewer than a majority of the nodes answered (the nodes that did were revoked);
78 a key of the lock holds another type; 2 bad flags, nodes or name; 128+N signal N ended it; 1
anything else.

Flags:
`

// runRevoke watches NAME for --watch, then revokes the holder it watched
// (Client.RevokeHolder), or with --force or no watch whoever holds it
// (Client.Revoke).
func runRevoke(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("revoke", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), revokeUsage); fs.PrintDefaults() }
	nodesFlag, prefix := nodeFlags(fs)
	timeout := fs.Duration("timeout", 2*time.Second, "the per-node timeout")
	watch := fs.Duration("watch", redlock.DefaultTTL/3+time.Second, "how long to watch the holder for an extension first (0: not at all)")
	force := fs.Bool("force", false, "revoke even a holder that extends the lock")
	var names []string
	for { // flags may come after the name too
		if err := parseFlags(fs, args, out); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(names) != 1:
		return &exitError{2, fmt.Errorf("revoke: one NAME, got %d", len(names))}
	case *watch < 0:
		return &exitError{2, fmt.Errorf("revoke: --watch must not be negative, got %v", *watch)}
	}
	c, done, cerr := adminClient(*nodesFlag, *prefix, *timeout, redlock.DefaultTTL)
	if cerr != nil {
		return cerr
	}
	defer done()
	name := names[0]
	var rv redlock.Revocation
	var err error
	if *watch > 0 && !*force {
		w, werr := watchForExtension(ctx, c, name, *watch)
		switch {
		case werr != nil:
			return revokeError(ctx, werr)
		case w.extended:
			return &exitError{73, fmt.Errorf("revoke: %q: its holder %s extended it while watched: it is alive "+
				"(--force revokes it anyway)", name, w.holder)}
		case w.holder == "":
			fmt.Fprintf(out, "%s: free, nothing revoked\n", name)
			return nil
		case w.now != w.holder && w.now != "":
			return &exitError{73, fmt.Errorf("revoke: %q changed hands while watched: %s released it and %s, "+
				"not watched, holds it now (watch again, or --force revokes it anyway)", name, w.holder, w.now)}
		}
		// Only the holder watched: one that took the lock since is not touched.
		rv, err = c.RevokeHolder(ctx, name, w.holder)
	} else {
		rv, err = c.Revoke(ctx, name)
	}
	switch {
	case rv.Holder != "":
		fmt.Fprintf(out, "%s: revoked %s\n", name, rv.Holder)
	case err == nil:
		fmt.Fprintf(out, "%s: free, nothing revoked\n", name)
	}
	for i, v := range rv.Revoked {
		switch {
		case rv.Nodes[i].Err != nil:
			fmt.Fprintf(out, "  node %d: %v\n", i, rv.Nodes[i].Err)
		case v != "":
			fmt.Fprintf(out, "  node %d: revoked %s\n", i, v)
		}
	}
	return revokeError(ctx, err)
}

// watched is what watchForExtension saw: the holder it watched ("" if the
// lock was free), whether that holder extended it, and who held it at the
// end ("" for nobody).
type watched struct {
	holder   string
	extended bool
	now      string
}

// watchForExtension inspects name twice, d apart (at most until the
// holder's expiry): the holder extended the lock if it held it both times
// and its expiry moved later in between.
func watchForExtension(ctx context.Context, c *redlock.Client, name string, d time.Duration) (watched, error) {
	first, err := c.Inspect(ctx, name)
	if err != nil || !first.Held {
		return watched{}, err
	}
	w := watched{holder: first.Holder}
	firstEnd := time.Now().Add(first.Remaining)
	select {
	case <-time.After(min(d, first.Remaining)):
	case <-ctx.Done():
		return w, ctx.Err()
	}
	second, err := c.Inspect(ctx, name)
	if err != nil {
		return w, err
	}
	w.now = second.Holder
	// An extension moves the expiry by a third of the TTL or more; the
	// margin only absorbs the two rounds' own latency.
	w.extended = second.Holder == first.Holder && time.Now().Add(second.Remaining).After(firstEnd.Add(100*time.Millisecond))
	return w, nil
}

func revokeError(ctx context.Context, err error) error {
	var sig signalled
	switch {
	case err == nil:
		return nil
	case isBadInput(err):
		return &exitError{2, err}
	case errors.As(context.Cause(ctx), &sig):
		return &exitError{128 + int(sig.sig), fmt.Errorf("revoke: %w", sig)}
	case errors.Is(err, redlock.ErrWrongType):
		return &exitError{78, err}
	case errors.Is(err, redlock.ErrUnavailable), errors.Is(err, redlock.ErrAuth), errors.Is(err, redlock.ErrNoPermission):
		return &exitError{69, err}
	}
	return err
}
