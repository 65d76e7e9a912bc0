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
REDLOCK_TOKEN (its fencing token). The lock is extended every TTL/3; if it is lost, CMD gets SIGTERM
(at the latest when the validity ends), then SIGKILL after --grace.

Exit codes:
  CMD's own  CMD ran under the lock (128+N if a signal N ended it)
  73         the lock is held elsewhere: this host skipped the run (not an error for cron)
  69         no lock could be taken: too few nodes answered, or the deployment is not provisioned
             (run "redlock provision"); alert on it, no host runs the job
  75         the lock was lost while CMD ran; CMD may have overlapped another holder
  127        CMD could not be started
  2          bad flags, nodes or lock name

Flags:
`

// runExec holds a lock while a command runs (execUsage):
//
//	redlock exec --nodes redis://h1:6379,redis://h2:6379,... --ttl 10s NAME -- CMD ARGS...
//
// Exit codes: 73 held elsewhere, 69 no quorum or not provisioned, 75 lock
// lost while the command ran, 127 command not started, 2 bad input;
// otherwise the child's.
func runExec(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), execUsage); fs.PrintDefaults() }
	nodesFlag := fs.String("nodes", os.Getenv("REDLOCK_NODES"), "comma-separated redis:// or rediss:// URLs (or REDLOCK_NODES)")
	ttl := fs.Duration("ttl", 10*time.Second, "lock TTL; the lock is extended every TTL/3")
	wait := fs.Duration("wait", 0, "how long to wait for the lock (0: fail at once if held)")
	grace := fs.Duration("grace", 10*time.Second, "after SIGTERM on lock loss, how long before SIGKILL")
	nodeTimeout := fs.Duration("node-timeout", redlock.DefaultNodeTimeout, "per-node timeout")
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

	lockCtx := ctx
	if *wait > 0 {
		var cancel context.CancelFunc
		lockCtx, cancel = context.WithTimeout(ctx, *wait)
		defer cancel()
	}
	var l *redlock.Lock
	if *wait > 0 {
		l, err = c.Lock(lockCtx, name)
	} else {
		l, err = c.TryLock(lockCtx, name)
	}
	if err != nil {
		return acquireError(name, err)
	}
	return holdWhileRunning(ctx, c, l, cmdArgs, *ttl, *grace)
}

// holdWhileRunning runs the child under l, extending it, and stops the
// child if the lock is lost: as soon as an extension fails and the validity
// left would not last until the next try, and at the latest when the
// validity ends, even while an extension is still waiting for the nodes.
func holdWhileRunning(ctx context.Context, c *redlock.Client, l *redlock.Lock, argv []string, ttl, grace time.Duration) error {
	defer l.Unlock(context.Background())
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "REDLOCK_NAME="+l.Name(), "REDLOCK_TOKEN="+strconv.FormatUint(l.Token(), 10))
	if err := cmd.Start(); err != nil {
		return &exitError{127, fmt.Errorf("start %s: %w", argv[0], err)}
	}
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
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	var lost error
	var kill *time.Timer
	stop := func(why error) {
		lost = why
		fmt.Fprintf(os.Stderr, "redlock: lock %q lost (%v); sending SIGTERM to %s, SIGKILL in %v\n", l.Name(), why, argv[0], grace)
		cmd.Process.Signal(syscall.SIGTERM)
		kill = time.AfterFunc(grace, func() { cmd.Process.Signal(syscall.SIGKILL) })
	}
	interrupted, expired := ctx.Done(), l.Done()
	for {
		select {
		case err := <-exited:
			if kill != nil {
				kill.Stop()
			}
			if lost != nil {
				return &exitError{75, fmt.Errorf("lock %q lost while the command ran: %w", l.Name(), lost)}
			}
			return childExit(err)
		case <-interrupted:
			interrupted = nil
			cmd.Process.Signal(syscall.SIGTERM) // pass the interrupt on; the child decides
		case <-expired:
			expired = nil
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
			if lost == nil && err != nil && (errors.Is(err, redlock.ErrExpired) || time.Until(l.Until()) <= ttl/3) {
				stop(err)
			}
		}
	}
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
