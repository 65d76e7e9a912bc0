package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Process is a redis-server child process on a loopback port.
type Process struct {
	cfg    Config
	binary string
	dir    string
	port   int
	clock  []string // libfaketime environment, nil unless cfg.FakeClock
	linkFaults
	clockFaults

	mu     sync.Mutex
	state  procState
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been reaped
}

var _ Node = (*Process)(nil)

// StartProcess starts a redis-server process and waits until it answers.
// It fails with ErrRedisServerMissing when there is no binary to run.
func StartProcess(ctx context.Context, cfg Config) (*Process, error) {
	binary := cfg.Binary
	if binary == "" {
		binary = DefaultBinary()
	}
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, fmt.Errorf("%w: %q (%v)", ErrRedisServerMissing, binary, err)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = "redis"
	}
	dir, err := os.MkdirTemp(cfg.BaseDir, "redlock-node-"+cfg.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	p := &Process{cfg: cfg, binary: path, dir: dir}
	p.linkFaults.name, p.clockFaults.name = cfg.Name, cfg.Name
	if cfg.FakeClock {
		p.clockFaults.file = filepath.Join(dir, "faketime-offset")
		if p.clock, err = fakeTimeEnv(dir, p.clockFaults.file); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	// A free port can be taken by someone else between our probe and the
	// server's bind; a few tries make that race harmless.
	for try := 0; ; try++ {
		p.port, err = freePort()
		if err == nil {
			err = p.Start(ctx)
		}
		if err == nil || try == 4 || ctx.Err() != nil {
			break
		}
	}
	if err == nil && cfg.Proxy {
		p.linkFaults.proxy, err = startProxy(p.DirectAddr())
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Process) Name() string { return p.cfg.Name }

// Addr is where clients connect: the proxy if there is one, else the server.
func (p *Process) Addr() string {
	if p.linkFaults.proxy != nil {
		return p.linkFaults.proxy.addr
	}
	return p.DirectAddr()
}

// DirectAddr is the server's own address, bypassing the proxy.
func (p *Process) DirectAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// Dir is the node's data directory.
func (p *Process) Dir() string { return p.dir }

// NewClient returns a client for the node with retries off, so a test sees
// each fault as it happens.
func (p *Process) NewClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
}

// Start runs the server (again), keeping whatever data it persisted.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case closed:
		return ErrClosed
	case running, paused:
		return fmt.Errorf("%w: node %s is already running", ErrState, p.cfg.Name)
	}
	args := []string{
		"--port", strconv.Itoa(p.port),
		"--bind", "127.0.0.1",
		"--dir", p.dir,
		"--save", "",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--logfile", "redis.log",
		"--maxmemory-policy", "noeviction",
	}
	args = append(args, p.cfg.Persistence.args()...)
	args = append(args, p.cfg.Args...)
	cmd := exec.Command(p.binary, args...)
	cmd.Dir = p.dir
	cmd.Env = append(append(os.Environ(), p.clock...), p.cfg.Env...)
	cmd.SysProcAttr = sysProcAttr()
	// The parent-death signal is tied to the OS thread that forks: keep this
	// goroutine on one thread while it does, so the signal means "the test
	// process died" and nothing else.
	runtime.LockOSThread()
	err := cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("node %s: start redis-server: %w", p.cfg.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := p.waitReady(ctx, cmd.Process.Pid, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	p.cmd, p.exited, p.state = cmd, exited, running
	return nil
}

func (p *Process) waitReady(ctx context.Context, pid int, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	err := waitPing(ctx, p.DirectAddr(), exited)
	if err == nil {
		// Another node started at the same moment may have drawn the same
		// free port: then this server failed to bind, and the PING was
		// answered by the other one. Make sure it is ours.
		err = checkPid(ctx, p.DirectAddr(), pid)
	}
	if errors.Is(err, errExited) {
		log := filepath.Join(p.dir, "redis.log")
		return fmt.Errorf("node %s: redis-server exited at start; see %s: %s", p.cfg.Name, log, lastLines(log))
	}
	if err != nil {
		return fmt.Errorf("node %s: redis-server did not answer PING: %w", p.cfg.Name, err)
	}
	return nil
}

var errNotOurs = errors.New("the port is served by another process")

func checkPid(ctx context.Context, addr string, pid int) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if v != strconv.Itoa(pid) {
				return fmt.Errorf("%w (pid %s, ours %d)", errNotOurs, v, pid)
			}
			return nil
		}
	}
	return fmt.Errorf("no process_id in INFO server")
}

func lastLines(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return string(b)
}

// Kill sends SIGKILL and waits for the process to end. A paused node can
// be killed too.
func (p *Process) Kill(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != running && p.state != paused {
		return fmt.Errorf("%w: node %s is not running", ErrState, p.cfg.Name)
	}
	return p.killLocked(ctx)
}

func (p *Process) killLocked(ctx context.Context) error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("node %s: kill: %w", p.cfg.Name, err)
	}
	select {
	case <-p.exited:
	case <-ctx.Done():
		return fmt.Errorf("node %s: waiting for exit: %w", p.cfg.Name, ctx.Err())
	}
	p.state = stopped
	return nil
}

// WipeData deletes the append-only file and snapshot of a stopped node.
func (p *Process) WipeData() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stopped {
		return fmt.Errorf("%w: stop node %s before wiping its data", ErrState, p.cfg.Name)
	}
	for _, name := range []string{"appendonlydir", "appendonly.aof", "dump.rdb"} {
		if err := os.RemoveAll(filepath.Join(p.dir, name)); err != nil {
			return fmt.Errorf("node %s: wipe: %w", p.cfg.Name, err)
		}
	}
	return nil
}

// Pause sends SIGSTOP.
func (p *Process) Pause(context.Context) error {
	return p.signal(running, paused, syscall.SIGSTOP)
}

// Resume sends SIGCONT.
func (p *Process) Resume(context.Context) error {
	return p.signal(paused, running, syscall.SIGCONT)
}

func (p *Process) signal(from, to procState, sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != from {
		return fmt.Errorf("%w: node %s cannot take %v now", ErrState, p.cfg.Name, sig)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("node %s: %v: %w", p.cfg.Name, sig, err)
	}
	p.state = to
	return nil
}

// Close kills the server if it runs and deletes its directory. It is safe
// to call more than once.
func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == closed {
		return nil
	}
	var err error
	if p.state == running || p.state == paused {
		err = p.killLocked(context.Background())
	}
	p.state = closed
	p.closeRelay()
	return errors.Join(err, os.RemoveAll(p.dir))
}
