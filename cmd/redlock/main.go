// Command redlock is the operator's tool for a RedLock deployment.
//
//	redlock exec --nodes URLS [--ttl 10s] NAME -- CMD ARGS...   hold a lock while a command runs
//	redlock doctor --nodes URLS [--json]                         preflight check of the nodes
//	redlock provision --nodes URLS [--reprovision-above T]       give the nodes their fencing identity
//	redlock repair --nodes URLS --node I [--wait | --now]        bring back a node whose fencing state is not intact
//	redlock inspect --nodes URLS [--rw | --permits K] NAME...    what the nodes hold of a lock, read only
//	redlock revoke --nodes URLS [--force] NAME                   release a lock whoever holds it
//
// The chaos harness and local development nodes live in their own command,
// redlock-chaos: this binary is what operators install, and it links
// neither the test harness (package node imports testing) nor the Docker
// client.
//
// Nodes are redis:// or rediss:// URLs; a URL without a password takes
// REDLOCK_PASSWORD, and --nodes defaults to REDLOCK_NODES.
//
// It uses the standard flag package rather than cobra: six subcommands
// with a few flags each, dispatched by a switch, need no framework, and the
// binary keeps the library's small dependency set. Flags take one or two
// dashes, as flag allows.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/quorumlock/redlock/internal/procguard"
	"github.com/redis/go-redis/v9"
)

const usage = `usage:
  redlock exec [flags] NAME -- CMD [ARGS...]
                             hold a lock while a command runs (cron jobs on exactly one host)
  redlock doctor [flags]     check a deployment's nodes: independence, persistence, eviction,
                             version, round trip, clock skew, fencing state, fenced keys and
                             memory headroom (exit 1 on failure)
  redlock provision [flags]  give every node its fencing identity (once, at deploy time);
                             --reprovision-above T after a majority lost its data
  redlock repair --node I    bring back a node that lost its data or was restarted or promoted;
                             it waits out the delayed restart (--wait, or --now); --adopt for
                             an emptied node (docs/operations.md, "Replacing a node")
  redlock inspect NAME...    what the nodes hold of a lock, read only: holder, time left, token;
                             --rw for a read-write lock, --permits K for a semaphore, --json
  redlock revoke NAME        release a lock whoever holds it, for a holder that cannot (a fence
                             keeps its late writes out); refused while the holder extends it,
                             unless --force

Nodes: --nodes redis://[:PASSWORD@]HOST:PORT,rediss://... or REDLOCK_NODES; REDLOCK_PASSWORD
for URLs without a password. Run "redlock COMMAND -h" for the flags and exit codes.

Exit codes: 0 success; 1 failure (doctor: a check failed); 2 bad flags, nodes or command.
exec adds 73 (held elsewhere: skipped), 69 (no quorum, or not provisioned), 75 (lock lost while
CMD ran, or found expired when released), 78 (--nodes is not the deployment's node list), 127 (CMD could not be started), 128+N (signal N ended exec before CMD started), and
otherwise CMD's own code (128+N if signal N ended CMD); repair adds 75 (too soon: wait out the
delayed restart) and 69 (no intact majority); inspect adds 69 (too few nodes answered) and 78 (a key
of another type); revoke adds 73 (the holder extended the lock while watched), 69 and 78 as inspect.

The chaos harness and local development nodes are a separate command: go run ./cmd/redlock-chaos.
`

func main() {
	// This executable is also exec's guardian (internal/procguard).
	procguard.Main()
	// go-redis logs every failed dial to a faulted node; the report says it better.
	redis.SetLogger(quiet{})
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// errorLine is err as one "redlock: " line: the library's errors carry
// their own "redlock: " prefix, wrapped or not, and it is said once.
func errorLine(err error) string {
	msg := strings.ReplaceAll(err.Error(), ": redlock: ", ": ")
	return "redlock: " + strings.TrimPrefix(msg, "redlock: ")
}

// parseFlags parses args into fs. Help asked for (-h, --help) goes to out,
// and is flag.ErrHelp, which run takes for a success; a bad flag goes to
// stderr, with the usage, and is a usage error (exit 2).
func parseFlags(fs *flag.FlagSet, args []string, out io.Writer) error {
	var msg bytes.Buffer
	fs.SetOutput(&msg)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		if _, werr := out.Write(msg.Bytes()); werr != nil {
			return werr
		}
		return err
	}
	os.Stderr.Write(msg.Bytes())
	if err != nil {
		return &exitError{2, err}
	}
	return nil
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func run(ctx context.Context, args []string, out io.Writer) error {
	if err := dispatch(ctx, args, out); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil // parseFlags printed the help asked for
}

func dispatch(ctx context.Context, args []string, out io.Writer) error {
	switch {
	case len(args) >= 1 && args[0] == "exec":
		return runExec(ctx, args[1:], out, os.Stderr)
	case len(args) >= 1 && args[0] == "doctor":
		return runDoctor(ctx, args[1:], out)
	case len(args) >= 1 && args[0] == "provision":
		return runProvision(ctx, args[1:], out)
	case len(args) >= 1 && args[0] == "repair":
		return runRepair(ctx, args[1:], out)
	case len(args) >= 1 && args[0] == "inspect":
		return runInspect(ctx, args[1:], out)
	case len(args) >= 1 && args[0] == "revoke":
		return runRevoke(ctx, args[1:], out)
	case len(args) >= 1 && (args[0] == "chaos" || args[0] == "nodes"):
		return &exitError{2, fmt.Errorf("%q moved to its own command: go run github.com/quorumlock/redlock/cmd/redlock-chaos %s", args[0], strings.Join(args, " "))}
	case len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help"):
		fmt.Fprint(out, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	if len(args) == 0 {
		return &exitError{2, errors.New("no command")}
	}
	return &exitError{2, fmt.Errorf("unknown command %q", args[0])}
}

// exitError carries the exit code the command must end with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
