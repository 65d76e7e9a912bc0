package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// exitError carries the exit code the command must end with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

const execUsage = `usage: redlock exec [flags] NAME -- CMD [ARGS...]

Holds the lock NAME while CMD runs, like etcdctl lock and consul lock. CMD gets REDLOCK_NAME and
REDLOCK_TOKEN (its fencing token). CMD runs in a process group of its own. The lock is extended
every TTL/3; if it is lost, CMD's whole process group (CMD and everything it started) gets SIGTERM
(at the latest when the validity ends), then SIGKILL after --grace. SIGINT and SIGTERM sent to
redlock exec are passed on to the group.

Cron on several hosts, exactly one run per tick (docs/operations.md, section 4):
  redlock exec --name-per-tick 1m --hold-for 30s --ttl 30s NAME -- CMD
locks NAME:<tick start, UTC> instead of NAME, retries when the hosts' votes split, and never
releases that name: it stays taken a TTL after CMD ends, and at least --hold-for plus TTL after it
was taken, so that a host that starts late in the same tick finds it taken. Exactly one host runs
each tick if the hosts' start times, clock skew included, spread less than --hold-for + TTL/2.

Exit codes:
  CMD's own  CMD ran under the lock (128+N if a signal N ended it)
  73         the lock is held elsewhere: this host skipped the run (not an error for cron)
  69         no lock could be taken: too few nodes answered, or the deployment is not provisioned
             (run "redlock provision"); alert on it, no host runs the job
  75         the lock was lost while CMD ran; CMD may have overlapped another holder
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
// child's.
func runExec(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), execUsage); fs.PrintDefaults() }
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	ttl := fs.Duration("ttl", 10*time.Second, "lock TTL; the lock is extended every TTL/3")
	wait := fs.Duration("wait", 0, "how long to wait for the lock (0: fail at once if held)")
	grace := fs.Duration("grace", 10*time.Second, "after SIGTERM on lock loss, how long before SIGKILL")
	nodeTimeout := fs.Duration("node-timeout", redlock.DefaultNodeTimeout, "per-node timeout")
	perTick := fs.Duration("name-per-tick", 0, "lock NAME:<start of the current tick, UTC> for ticks of this length (it must divide 24h), never released")
	holdFor := fs.Duration("hold-for", 0, "keep the lock at least this long after taking it, even if CMD ends sooner")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
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
	c, err := redlock.New(clients, redlock.WithTTL(*ttl), redlock.WithNodeTimeout(*nodeTimeout), redlock.WithLogger(log))
	if err != nil {
		return &exitError{2, err}
	}
	defer c.Close()

	var l *redlock.Lock
	switch {
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
		return acquireError(name, err)
	}
	return holdWhileRunning(ctx, l, cmdArgs, holding{ttl: *ttl, grace: *grace, holdFor: *holdFor, keep: *perTick != 0})
}

// holding says how holdWhileRunning keeps a lock.
type holding struct {
	ttl     time.Duration // the client's TTL: extend every ttl/3
	grace   time.Duration // SIGTERM to SIGKILL after the lock is lost
	holdFor time.Duration // keep the lock at least this long after taking it
	keep    bool          // leave the lock to expire instead of releasing it
}

// holdWhileRunning runs the child under l, extending it, and stops the
// child's process group if the lock is lost: as soon as an extension fails
// and the validity left would not last until the next try, and at the
// latest when the validity ends, even while an extension is still waiting
// for the nodes. If the child ends sooner than h.holdFor after l was
// taken, the lock is kept, extended, until then.
func holdWhileRunning(ctx context.Context, l *redlock.Lock, argv []string, h holding) error {
	taken := time.Now()
	release := true
	defer func() {
		if release {
			l.Unlock(context.Background())
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "REDLOCK_NAME="+l.Name(), "REDLOCK_TOKEN="+strconv.FormatUint(l.Token(), 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Listen before the start, so that no signal falls between the two.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return &exitError{127, fmt.Errorf("start %s: %w", argv[0], err)}
	}
	group := processGroup(cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Extensions run in their own goroutine, so that the loop sees the
	// validity end while one waits for the nodes (up to the node timeout).
	extended := make(chan error, 1)
	extending := false
	defer func() {
		if extending {
			<-extended // bounded by the node timeout
		}
	}()
	tick := time.NewTicker(h.ttl / 3)
	defer tick.Stop()
	var lost error
	var killAt time.Time
	var kill *time.Timer
	stop := func(why error) {
		lost = why
		fmt.Fprintf(os.Stderr, "redlock: lock %q lost (%v); sending SIGTERM to %s and its process group, SIGKILL in %v\n", l.Name(), why, argv[0], h.grace)
		group.signal(syscall.SIGTERM)
		killAt = time.Now().Add(h.grace)
		kill = time.AfterFunc(h.grace, func() { group.signal(syscall.SIGKILL) })
	}
	var result error
	// finish ends a run whose child has exited. A kept lock (a tick's name)
	// is extended once more, so that it stays taken a whole TTL after the
	// child or the hold ended, not just what was left of the last extension.
	finish := func() error {
		if h.keep {
			release = false
			if extending {
				<-extended
				extending = false
			}
			if err := l.Extend(context.Background()); err != nil {
				fmt.Fprintf(os.Stderr, "redlock: could not extend %q one last time: %v\n", l.Name(), err)
			}
		}
		return result
	}
	var held <-chan time.Time // after the child's exit: the end of --hold-for
	interrupts := 0           // signals and cancellations: no holding on after the child
	interrupted, expired := ctx.Done(), l.Done()
	for {
		select {
		case err := <-exited:
			exited = nil
			if lost != nil {
				// The leader is gone; what it started must not outlive the
				// lock's loss either, so the rest of the group gets the
				// rest of the grace.
				reapGroup(group, killAt)
				kill.Stop()
				return &exitError{75, fmt.Errorf("lock %q lost while the command ran: %w", l.Name(), lost)}
			}
			result = childExit(err)
			left := time.Until(taken.Add(h.holdFor))
			if left <= 0 || interrupts > 0 {
				return finish()
			}
			held = time.After(left)
		case <-held:
			return finish()
		case s := <-sigs:
			interrupts++
			if exited == nil { // holding on after the child: an interrupt ends it
				return finish()
			}
			group.signal(s.(syscall.Signal))
		case <-interrupted:
			interrupted = nil
			interrupts++
			if exited == nil {
				return finish()
			}
			if _, ok := context.Cause(ctx).(signalled); !ok {
				// Cancelled by a caller, not a signal (which sigs passed on).
				group.signal(syscall.SIGTERM)
			}
		case <-expired:
			expired = nil
			if exited == nil {
				fmt.Fprintf(os.Stderr, "redlock: lock %q lost after the command ended, within --hold-for\n", l.Name())
				return result
			}
			if lost == nil {
				stop(errors.New("validity ended"))
			}
		case <-tick.C:
			if lost != nil || extending {
				continue
			}
			extending = true
			go func() { extended <- l.Extend(context.Background()) }()
		case err := <-extended:
			extending = false
			if lost == nil && err != nil && (errors.Is(err, redlock.ErrExpired) || time.Until(l.Until()) <= h.ttl/3) {
				if exited == nil {
					fmt.Fprintf(os.Stderr, "redlock: lock %q lost after the command ended, within --hold-for: %v\n", l.Name(), err)
					return result
				}
				stop(err)
			}
		}
	}
}

// reapGroup waits, until deadline at the latest, for the processes left in
// the group to exit, then kills what remains.
func reapGroup(g processGroup, deadline time.Time) {
	for g.alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	g.signal(syscall.SIGKILL)
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
	case errors.Is(err, redlock.ErrEmptyName), errors.Is(err, redlock.ErrNameTooLong), errors.Is(err, redlock.ErrBadName):
		return &exitError{2, err}
	}
	return &exitError{69, fmt.Errorf("could not acquire %q, the nodes are unavailable (no host can take the lock): %w", name, err)}
}

func childExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		return &exitError{code, fmt.Errorf("command exited with %d", code)}
	}
	return &exitError{1, err}
}

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
