// Package pgserver starts a throwaway PostgreSQL server on loopback for
// tests: a fresh cluster in a temporary directory, owned by the process that
// started it and deleted when it stops.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// Server is one running postgres process.
type Server struct {
	// DSN connects as the superuser "postgres" to the database "postgres",
	// over TCP on 127.0.0.1, without TLS or a password.
	DSN  string
	Port int

	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// ErrNotInstalled: no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("pgserver: PostgreSQL server not found (initdb, postgres); " +
	"install it with `sudo apt-get install -y postgresql` or run `make deps`")

// binDir finds the directory holding initdb and postgres: PATH first, then
// Debian's versioned directories, newest first.
func binDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start initialises a cluster and starts postgres on a free loopback port.
// PostgreSQL refuses to run as root: as root, the cluster belongs to the
// "postgres" system user and the server runs as that user.
func Start(ctx context.Context) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redlock-pg-*")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, done: make(chan struct{})}
	cred, err := credential(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgserver: initdb: %w\n%s", err, out)
	}
	// A free port can be taken between probing and binding: try a few.
	for attempt := 0; ; attempt++ {
		err = s.start(ctx, bin, data, cred)
		if err == nil {
			return s, nil
		}
		if attempt == 4 || ctx.Err() != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func (s *Server) start(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logPath := filepath.Join(s.dir, fmt.Sprintf("postgres-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if cred != nil {
		_ = os.Chown(logPath, int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
		"-c", "full_page_writes=off", "-c", "synchronous_commit=off", "-c", "max_connections=50")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: a test binary that dies does not leave servers behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	s.cmd, s.Port = cmd, port
	s.done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := s.waitReady(ctx, port); err != nil {
		s.stop()
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("%w\n%s", err, log)
	}
	return nil
}

// waitReady waits until postgres accepts connections. A TCP accept is not
// enough (the server accepts before recovery ends), so it also waits for
// the "ready" line of the postmaster.pid file.
func (s *Server) waitReady(ctx context.Context, port int) error {
	deadline := time.Now().Add(30 * time.Second)
	pidFile := filepath.Join(s.dir, "data", "postmaster.pid")
	for {
		select {
		case <-s.done:
			return errors.New("pgserver: postgres exited during startup")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if b, err := os.ReadFile(pidFile); err == nil && ready(b) {
			c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
			if err == nil {
				c.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("pgserver: postgres not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ready reads postmaster.pid's status line (the 8th), which says "ready"
// once the server accepts connections.
func ready(pidFile []byte) bool {
	lines := 0
	start := 0
	for i, b := range pidFile {
		if b == '\n' {
			lines++
			if lines == 8 {
				line := string(pidFile[start:i])
				return len(line) >= 5 && line[:5] == "ready"
			}
			start = i + 1
		}
	}
	return false
}

// Close stops the server (a fast shutdown) and deletes its files.
func (s *Server) Close() error {
	s.stop()
	return os.RemoveAll(s.dir)
}

func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// credential returns who the server runs as: nil (this process's user)
// unless this process is root, then the postgres system user, who is given
// dir.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgserver: running as root needs the postgres system user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
