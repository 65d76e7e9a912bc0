package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/quorumlock/redlock"
)

const inspectUsage = `usage: redlock inspect [flags] NAME [NAME...]

Prints what the nodes hold of a lock, read only: whether a majority holds it, which hold (its ID,
what the holder's l.ID() returns and can log), for how much longer a majority agrees, under which
fencing token, and each node's answer. It writes nothing, takes no lock and joins no queue, and its
answer may be stale the moment it prints: look with it, never decide with it.

  NAME             a lock (a mutex: Lock, exec)
  NAME NAME...     several locks in one round: a multi-lock's members
  --rw NAME        a read-write lock: its writer, its readers, the writers queued
  --permits K NAME a semaphore of K permits: the size stored, each permit's holder and slots,
                   the free slots, the waiters in line

Exit codes: 0 printed (held or free); 69 fewer than a majority of the nodes answered (what the others
said is printed); 78 a key of the lock holds another type (another application writes under
--key-prefix); 2 bad flags, nodes or names; 128+N signal N ended it; 1 anything else.

Flags:
`

// runInspect prints Client.Inspect, InspectMulti, RWMutex.Inspect or
// Semaphore.Inspect of the names given.
func runInspect(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), inspectUsage); fs.PrintDefaults() }
	nodesFlag, prefix := nodeFlags(fs)
	timeout := fs.Duration("timeout", 2*time.Second, "the per-node timeout (with nodes silent, the round waits for a majority at most ten of these, and 5 s)")
	rw := fs.Bool("rw", false, "NAME is a read-write lock")
	permits := fs.Int("permits", 0, "NAME is a semaphore of this many permits")
	asJSON := fs.Bool("json", false, "print the snapshot as JSON (the library's types, durations in ns)")
	// Flags may come after names too (inspect NAME --json): parse again
	// after each name.
	var names []string
	for {
		if err := parseFlags(fs, args, out); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	permitsSet := false
	fs.Visit(func(f *flag.Flag) { permitsSet = permitsSet || f.Name == "permits" })
	switch {
	case permitsSet && *permits < 1:
		return &exitError{2, fmt.Errorf("inspect: --permits must be at least 1, got %d", *permits)}
	case len(names) == 0:
		return &exitError{2, errors.New("inspect: no NAME given")}
	case (*rw || *permits != 0) && len(names) != 1:
		return &exitError{2, errors.New("inspect: --rw and --permits take one NAME")}
	case *rw && *permits != 0:
		return &exitError{2, errors.New("inspect: --rw or --permits, not both")}
	}
	c, done, err := adminClient(*nodesFlag, *prefix, *timeout, redlock.DefaultTTL)
	if err != nil {
		return err
	}
	defer done()
	var snapshot any
	var lines func(io.Writer)
	switch {
	case *rw:
		m, merr := c.RWMutex(names[0])
		if merr != nil {
			return &exitError{2, merr}
		}
		info, ierr := m.Inspect(ctx)
		snapshot, lines, err = info, func(w io.Writer) { printRW(w, info) }, ierr
	case *permits != 0:
		s, serr := c.Semaphore(names[0], *permits)
		if serr != nil {
			return &exitError{2, serr}
		}
		info, ierr := s.Inspect(ctx)
		snapshot, lines, err = info, func(w io.Writer) { printSemaphore(w, info) }, ierr
	case len(names) == 1:
		info, ierr := c.Inspect(ctx, names[0])
		snapshot, lines, err = info, func(w io.Writer) { printLock(w, "", info) }, ierr
	default:
		infos, ierr := c.InspectMulti(ctx, names)
		snapshot, lines, err = infos, func(w io.Writer) {
			for _, info := range infos {
				printLock(w, info.Name+": ", info)
			}
		}, ierr
	}
	if err != nil && isBadInput(err) {
		return &exitError{2, err}
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(snapshot); jerr != nil {
			return jerr
		}
	} else {
		lines(out)
	}
	var sig signalled
	switch {
	case err == nil:
		return nil
	case errors.As(context.Cause(ctx), &sig):
		return &exitError{128 + int(sig.sig), fmt.Errorf("inspect: %w", sig)}
	case errors.Is(err, redlock.ErrWrongType):
		return &exitError{78, err}
	case errors.Is(err, redlock.ErrUnavailable), errors.Is(err, redlock.ErrAuth), errors.Is(err, redlock.ErrNoPermission):
		return &exitError{69, err}
	}
	return err
}

// isBadInput: a name or names refused before anything was sent.
func isBadInput(err error) bool {
	for _, bad := range []error{redlock.ErrEmptyName, redlock.ErrNameTooLong, redlock.ErrBadName, redlock.ErrNoNames,
		redlock.ErrTooManyNames, redlock.ErrDuplicateName, redlock.ErrSpansSlots, redlock.ErrBadPermits} {
		if errors.Is(err, bad) {
			return true
		}
	}
	return false
}

func printLock(w io.Writer, label string, info redlock.LockInfo) {
	if info.Held {
		fmt.Fprintf(w, "%sheld by %s for %v more, token %d\n", label, info.Holder, info.Remaining.Round(time.Millisecond), info.Token)
	} else {
		fmt.Fprintf(w, "%sfree\n", label)
	}
	for _, n := range info.Nodes {
		switch {
		case n.Err != nil:
			fmt.Fprintf(w, "  node %d: %v\n", n.Node, n.Err)
		case n.Holder == "":
			fmt.Fprintf(w, "  node %d: free, token %d (%v)\n", n.Node, n.Token, n.Latency.Round(time.Microsecond))
		default:
			fmt.Fprintf(w, "  node %d: %s for %v, token %d (%v)\n", n.Node, n.Holder, n.TTL, n.Token, n.Latency.Round(time.Microsecond))
		}
	}
}

func printRW(w io.Writer, info redlock.RWLockInfo) {
	printLock(w, "writer: ", info.Write)
	fmt.Fprintf(w, "readers: %d, read token %d\n", len(info.Readers), info.ReadToken)
	for _, r := range info.Readers {
		fmt.Fprintf(w, "  %s for %v more\n", r.Holder, r.Remaining.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "writers queued: %d\n", info.WritersQueued)
}

func printSemaphore(w io.Writer, info redlock.SemaphoreInfo) {
	fmt.Fprintf(w, "size stored: %d (version %d); free: %d of %d; waiting: %d\n", info.Permits, info.Version, info.Free, len(info.Slots), info.Waiting)
	for _, h := range info.Holders {
		fmt.Fprintf(w, "  %s holds slots %v for %v more, token %d\n", h.Holder, h.Slots, h.Remaining.Round(time.Millisecond), h.Token)
	}
	for _, n := range info.Nodes {
		if n.Err != nil {
			fmt.Fprintf(w, "  node %d: %v\n", n.Node, n.Err)
		}
	}
}
