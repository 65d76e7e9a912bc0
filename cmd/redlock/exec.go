package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/quorumlock/redlock"
	leaseengine "github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/procguard"
)

const execUsage = `usage: redlock exec [flags] NAME -- CMD [ARGS...]

Holds the lock NAME while CMD runs, like etcdctl lock and consul lock. CMD gets REDLOCK_NAME and
REDLOCK_TOKEN (its fencing token). The lock is extended every TTL/3. CMD runs in a process group of
its own, watched by a guardian process (redlock itself) that SIGKILLs the whole group if redlock
exec dies in any way, SIGKILL and the OOM killer included, or is stopped (Ctrl-Z) past the lock's
validity plus --grace. The group (CMD and everything it
started) gets SIGTERM, then SIGKILL --grace later:
  - when the lock is lost (at the latest when the validity ends): exit 75;
  - when redlock exec gets SIGINT or SIGTERM: that signal is passed on to the group, and a second
    one sends SIGKILL at once;
  - when CMD exits and leaves processes in its group: the lock is held, and extended, until they
    are gone, and only then released; the exit code is still CMD's.
A process that leaves the group (setsid: a daemon) is out of exec's reach.

At most K of a job at once, across hosts (a semaphore, docs/semaphore.md):
  redlock exec --permits K [--wait D] NAME -- CMD
holds one of K permits of the semaphore NAME instead of the lock; CMD also gets REDLOCK_SLOT, and
REDLOCK_NAME is the slot's name (NAME#<slot>), which is what to fence with REDLOCK_TOKEN. Every
caller of NAME must give the same K (exit 78 otherwise), at least 1. 73 then means all K permits
are taken. With --name-per-tick the semaphore is NAME:<tick start>, and a permit is kept until it
expires, as the tick's lock is: K hosts run each tick (give --hold-for and --ttl as for the lock).

One host at a time running a service, for as long as it leads (a leader election, docs/election.md):
  redlock exec --elect [--again] [--value V] NAME -- CMD
waits until this host leads the election NAME, then runs CMD with REDLOCK_TERM (the leader's term, a
fencing token); when the leadership is lost CMD is stopped: SIGTERM once the lease has --grace plus a
margin left (2% of the TTL) without an extension, SIGKILL at that margin before the lease can pass, from
the guardian if exec itself is stopped; --grace is at most TTL/3 minus the margin (default TTL/5). Then
exec exits 75, or with --again campaigns again. SIGTERM to exec resigns: the next host in
line leads at once. --value is what Leader shows (default: the host name).

Cron on several hosts, exactly one run per tick (docs/operations.md, section 4):
  redlock exec --name-per-tick 1m --hold-for 30s --ttl 30s NAME -- CMD
locks NAME:<tick start, UTC> instead of NAME, retries when the hosts' votes split, and never
releases that name: it stays taken a TTL after CMD ends, and at least --hold-for plus TTL after it
was taken, so that a host that starts late in the same tick finds it taken. Exactly one host runs
each tick if the hosts' start times, clock skew included, spread less than --hold-for + TTL/2.

Exit codes:
  CMD's own  CMD ran under the lock (128+N if a signal N ended it)
  73         the lock is held elsewhere: this host skipped the run (not an error for cron)
  69         no lock could be taken: too few nodes answered (with --wait: for 15 s in a row), the
             nodes refused the credentials or are cluster nodes, or the deployment is not
             provisioned (run "redlock provision"); alert on it, no host runs the job
  75         the lock was lost while CMD ran; CMD may have overlapped another holder
  78         --nodes is not the deployment's node list (each node of it, once), or --permits is not the
             number the semaphore's other callers use: fix the configuration
  127        CMD could not be started (not found, not executable)
  128+N      signal N (SIGINT 130, SIGTERM 143) ended redlock exec while it waited for the lock
  2          bad flags, nodes or lock name
  1          anything else

Flags:
`

// runExec holds a lock while a command runs (execUsage):
//
//	redlock exec --nodes redis://h1:6379,redis://h2:6379,... --ttl 10s NAME -- CMD ARGS...
//
// Exit codes: 73 held elsewhere, 69 no quorum or not provisioned, 75 lock
// lost while the command ran, 127 command not started, 128+N interrupted
// by signal N before the command started, 2 bad input; otherwise the
// child's (137 if it had to be SIGKILLed).
func runExec(ctx context.Context, args []string, out, stderr io.Writer) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), execUsage); fs.PrintDefaults() }
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	ttl := fs.Duration("ttl", 10*time.Second, "lock TTL; the lock is extended every TTL/3")
	wait := fs.Duration("wait", 0, "how long to wait for the lock (0: fail at once if held)")
	grace := fs.Duration("grace", 10*time.Second, "from the SIGTERM to CMD's process group (lock lost, a signal passed on, CMD gone and processes left) to its SIGKILL")
	nodeTimeout := fs.Duration("node-timeout", redlock.DefaultNodeTimeout, "per-node timeout")
	prefix := fs.String("key-prefix", "redlock", "the clients' key prefix (WithKeyPrefix): the lock lives at PREFIX:{NAME}")
	perTick := fs.Duration("name-per-tick", 0, "lock NAME:<start of the current tick, UTC> for ticks of this length (it must divide 24h), never released")
	holdFor := fs.Duration("hold-for", 0, "keep the lock at least this long after taking it, even if CMD ends sooner")
	elect := fs.Bool("elect", false, "NAME is an election: wait until this host leads it, run CMD while it leads, stop CMD when it no longer does (a long-lived service on one host at a time)")
	value := fs.String("value", "", "with --elect: the value this host publishes as leader (default: the host name)")
	again := fs.Bool("again", false, "with --elect: after losing the leadership and stopping CMD, campaign again instead of exiting 75")
	permits := fs.Int("permits", 0, "hold one of this many permits of the semaphore NAME instead of the lock: at most this many CMDs at once (every caller of NAME must give the same number)")
	if err := parseFlags(fs, args, out); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) < 2 || (rest[1] == "--" && len(rest) < 3) {
		return &exitError{2, errors.New("usage: redlock exec [flags] NAME -- CMD [ARGS...]")}
	}
	name, cmdArgs := rest[0], rest[1:]
	if cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	if *perTick != 0 {
		if *wait > 0 {
			return &exitError{2, errors.New("--name-per-tick and --wait exclude each other: a tick's name is taken once")}
		}
		var err error
		if name, err = tickName(name, *perTick, time.Now()); err != nil {
			return &exitError{2, err}
		}
	}
	if *holdFor < 0 {
		return &exitError{2, errors.New("--hold-for must not be negative")}
	}
	permitsSet := false
	fs.Visit(func(f *flag.Flag) { permitsSet = permitsSet || f.Name == "permits" })
	if permitsSet && *permits < 1 {
		// 0 would silently take the plain lock, which no holder of a
		// permit excludes.
		return &exitError{2, fmt.Errorf("--permits must be at least 1, got %d (leave it out to take the lock)", *permits)}
	}
	if *elect && (permitsSet || *perTick != 0 || *holdFor != 0 || *wait != 0) {
		return &exitError{2, errors.New("--elect excludes --permits, --name-per-tick, --hold-for and --wait: it waits until elected")}
	}
	if !*elect && (*value != "" || *again) {
		return &exitError{2, errors.New("--value and --again go with --elect")}
	}
	if *elect && *value == "" {
		*value, _ = os.Hostname()
	}
	if *elect {
		graceSet := false
		fs.Visit(func(f *flag.Flag) { graceSet = graceSet || f.Name == "grace" })
		var err error
		if *grace, err = electGrace(*ttl, *grace, graceSet); err != nil {
			return &exitError{2, err}
		}
	}
	clients, err := dialNodes(*nodesFlag)
	if err != nil {
		return &exitError{2, err}
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := redlock.New(clients, redlock.WithKeyPrefix(*prefix), redlock.WithTTL(*ttl), redlock.WithNodeTimeout(*nodeTimeout), redlock.WithLogger(log))
	if err != nil {
		return &exitError{2, err}
	}
	defer c.Close()
	if *elect {
		return runElected(ctx, c, name, *value, *again, cmdArgs, holding{ttl: *ttl, grace: *grace, killMargin: leaseengine.StopMargin(*ttl)})
	}
	// The guardian that kills the job if exec dies (internal/procguard),
	// started before the lock is taken: its start does not eat the TTL.
	guard, err := procguard.Start(cmdArgs)
	if err != nil {
		return &exitError{1, err}
	}
	defer guard.Close()

	var l lease
	switch {
	case *permits != 0:
		l, err = takePermit(ctx, c, name, *permits, *wait)
	case *perTick != 0:
		l, err = tryLockContended(ctx, c, name, *ttl/2)
	case *wait > 0:
		lockCtx, cancel := context.WithTimeout(ctx, *wait)
		defer cancel()
		l, err = c.Lock(lockCtx, name)
	default:
		l, err = c.TryLock(ctx, name)
	}

	if err != nil {
		if s, ok := context.Cause(ctx).(signalled); ok {
			return &exitError{128 + int(s.sig), fmt.Errorf("waiting for %q: %w", name, s)}
		}
		if *permits != 0 && (errors.Is(err, redlock.ErrLocked) || errors.Is(err, redlock.ErrSuperseded)) {
			return &exitError{73, fmt.Errorf("all %d permits of the semaphore %q are held elsewhere: %w", *permits, name, err)}
		}
		return acquireError(name, err)
	}
	return holdWhileRunning(ctx, l, guard, cmdArgs, holding{ttl: *ttl, grace: *grace, holdFor: *holdFor, keep: *perTick != 0})
}

// acquireError gives a failed acquisition its exit code: 73 only when
// another holder has the lock, so that cron wrappers can ignore it; an
// outage (69) must not pass for a skipped run.
func acquireError(name string, err error) error {
	switch {
	case errors.Is(err, redlock.ErrLocked), errors.Is(err, redlock.ErrSuperseded):
		return &exitError{73, fmt.Errorf("%q is held elsewhere: %w", name, err)}
	case errors.Is(err, redlock.ErrNotProvisioned):
		return &exitError{69, fmt.Errorf("could not acquire %q: the deployment is not provisioned: run "+
			"`redlock provision` once while every node is up (if it was in use, a majority of the nodes lost "+
			"their data: docs/operations.md, \"A majority lost\"): %w", name, err)}
	case errors.Is(err, redlock.ErrWrongNodeList):
		return &exitError{78, fmt.Errorf("could not acquire %q: --nodes is not the deployment's node list (each "+
			"node of the deployment, once): %w", name, err)}
	case errors.Is(err, redlock.ErrAuth), errors.Is(err, redlock.ErrNoPermission):
		return &exitError{69, fmt.Errorf("could not acquire %q: the nodes refused the credentials or the ACL user "+
			"(check the user and password in --nodes): %w", name, err)}
	case errors.Is(err, redlock.ErrFencingNode):
		return &exitError{69, fmt.Errorf("could not acquire %q: the nodes are Redis Cluster nodes (CROSSSLOT); "+
			"--nodes must list standalone masters (or Sentinel-managed ones), each on its own: %w", name, err)}
	case errors.Is(err, redlock.ErrEmptyName), errors.Is(err, redlock.ErrNameTooLong), errors.Is(err, redlock.ErrBadName),
		errors.Is(err, redlock.ErrBadPermits), errors.Is(err, redlock.ErrSpansSlots):
		return &exitError{2, err}
	case errors.Is(err, redlock.ErrPermits):
		return &exitError{78, fmt.Errorf("could not acquire a permit of %q: the nodes store another number of permits "+
			"than --permits (every caller must give the same; SetPermits changes it): %w", name, err)}
	}
	return &exitError{69, fmt.Errorf("could not acquire %q, the nodes are unavailable (no host can take the lock): %w", name, err)}
}

// takePermit takes one of permits permits of the semaphore name: one
// attempt, or waiting up to wait.
func takePermit(ctx context.Context, c *redlock.Client, name string, permits int, wait time.Duration) (lease, error) {
	s, err := c.Semaphore(name, permits)
	if err != nil {
		return nil, err
	}
	var p *redlock.Permit
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		p, err = s.Acquire(wctx)
	} else {
		p, err = s.TryAcquire(ctx)
	}
	if err != nil {
		return nil, err
	}
	return permit{p}, nil
}
