package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"
)

// ContainerConfig describes a containerised node.
type ContainerConfig struct {
	Config
	// Image to run, such as "redis:7.2". Empty: build HostImage from the
	// host's redis-server (where no registry can be reached), or
	// ValkeyHostImage when Config.Binary, else $REDLOCK_SERVER_BINARY, is a
	// valkey-server. A named image runs without clock faults (it has no
	// libfaketime).
	Image string
	// Pool is the Docker connection; nil connects to the default endpoint.
	Pool *dockertest.Pool
}

// ErrNoDocker: no Docker engine answered.
var ErrNoDocker = errors.New("node: no Docker engine reachable")

// DockerPool connects to the local Docker engine and checks that it
// answers; it returns ErrNoDocker otherwise.
func DockerPool() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	if err := pool.Client.Ping(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	pool.MaxWait = 30 * time.Second
	return pool, nil
}

// Container is a redis-server in a Docker container, published on a
// loopback port. Its data and clock offset live in host directories
// mounted into it, so they survive a restart and can be wiped from here.
type Container struct {
	cfg      ContainerConfig
	pool     *dockertest.Pool
	res      *dockertest.Resource
	dir      string // host side: data/ and clock/
	hostPort int
	linkFaults
	clockFaults

	mu    sync.Mutex
	state procState
}

var _ Node = (*Container)(nil)

// StartContainer starts one containerised node and waits until it answers.
func StartContainer(ctx context.Context, cfg ContainerConfig) (*Container, error) {
	pool := cfg.Pool
	if pool == nil {
		var err error
		if pool, err = DockerPool(); err != nil {
			return nil, err
		}
	}
	if cfg.Name == "" {
		cfg.Name = "redis"
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	image, fakeClock := cfg.Image, false
	if image == "" {
		var err error
		if image, err = buildHostImage(pool, cfg.Binary); err != nil {
			return nil, err
		}
		fakeClock = cfg.FakeClock
	} else if cfg.FakeClock {
		return nil, fmt.Errorf("%w: clock faults need the host image, not %s", ErrNotEnabled, image)
	}
	dir, err := os.MkdirTemp(cfg.BaseDir, "redlock-container-"+cfg.Name+"-")
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"data", "clock"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o777); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	c := &Container{cfg: cfg, pool: pool, dir: dir}
	c.linkFaults.name, c.clockFaults.name = cfg.Name, cfg.Name

	args := []string{"--port", "6379", "--bind", "0.0.0.0", "--dir", "/data", "--save", "",
		"--protected-mode", "no", "--maxmemory-policy", "noeviction"}
	args = append(append(args, cfg.Persistence.args()...), cfg.Args...)
	env := append([]string(nil), cfg.Env...)
	if fakeClock {
		c.clockFaults.file = filepath.Join(dir, "clock", "offset")
		if err := os.WriteFile(c.clockFaults.file, []byte("+0\n"), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		env = append(env, "LD_LIBRARY_PATH=/stub", "LD_PRELOAD=/faketime/libfaketime.so.1",
			"FAKETIME_TIMESTAMP_FILE=/clock/offset", "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1")
	}
	if err := c.run(image, env, args); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.state = running
	if err := c.waitReady(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if cfg.Proxy {
		if c.linkFaults.proxy, err = startProxy(c.DirectAddr()); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// run creates and starts the container on a free loopback port. Another
// program can take the port between freePort and Docker's bind; then the
// half-made container is removed and another port drawn.
func (c *Container) run(image string, env, args []string) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if c.hostPort, err = freePort(); err != nil {
			return err
		}
		name := fmt.Sprintf("redlock-%s-%d", c.cfg.Name, c.hostPort)
		opts := &dockertest.RunOptions{
			Name:       name,
			Repository: image,
			Tag:        "latest",
			Env:        env,
			Mounts:     []string{filepath.Join(c.dir, "data") + ":/data", filepath.Join(c.dir, "clock") + ":/clock"},
			PortBindings: map[dc.Port][]dc.PortBinding{
				"6379/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(c.hostPort)}},
			},
			ExposedPorts: []string{"6379/tcp"},
			Labels:       map[string]string{"redlock.node": c.cfg.Name},
		}
		if c.cfg.Image == "" {
			opts.Cmd = args
		} else {
			opts.Cmd = append([]string{"redis-server"}, args...)
		}
		if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
			opts.Repository, opts.Tag = image[:i], image[i+1:]
		}
		c.res, err = c.pool.RunWithOptions(opts, func(hc *dc.HostConfig) {
			hc.AutoRemove = false
			hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
		})
		if err == nil {
			return nil
		}
		// dockertest leaves a container that was created but failed to start.
		_ = c.removeByName(name)
		if !strings.Contains(err.Error(), "port is already allocated") {
			break
		}
	}
	return fmt.Errorf("node %s: run container: %w", c.cfg.Name, err)
}

// removeByName removes the container called exactly name, if there is one.
func (c *Container) removeByName(name string) error {
	found, err := c.pool.Client.ListContainers(dc.ListContainersOptions{
		All: true, Filters: map[string][]string{"name": {"^/" + name + "$"}},
	})
	if err != nil {
		return err
	}
	for _, f := range found {
		if err := c.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: f.ID, Force: true, RemoveVolumes: true}); err != nil {
			return err
		}
	}
	return nil
}

// StartContainers starts n containerised nodes, named n0..n(n-1).
func StartContainers(ctx context.Context, n int, cfg ContainerConfig) (Group, error) {
	if cfg.Pool == nil {
		pool, err := DockerPool()
		if err != nil {
			return nil, err
		}
		cfg.Pool = pool
	}
	if cfg.Image == "" {
		if _, err := buildHostImage(cfg.Pool, cfg.Binary); err != nil {
			return nil, err
		}
	}
	return startGroup(ctx, n, func(ctx context.Context, name string) (Node, error) {
		c := cfg
		c.Name = name
		return StartContainer(ctx, c)
	})
}

func (c *Container) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	if err := waitPing(ctx, c.DirectAddr(), nil); err != nil {
		return fmt.Errorf("node %s: container did not answer PING: %w; logs: %s", c.cfg.Name, err, c.logs())
	}
	return nil
}

func (c *Container) logs() string {
	var out bytes.Buffer
	_ = c.pool.Client.Logs(dc.LogsOptions{Container: c.res.Container.ID, OutputStream: &out, ErrorStream: &out,
		Stdout: true, Stderr: true, Tail: "5"})
	return strings.TrimSpace(out.String())
}

func (c *Container) Name() string { return c.cfg.Name }

// Addr is where clients connect: the proxy if there is one.
func (c *Container) Addr() string {
	if c.linkFaults.proxy != nil {
		return c.linkFaults.proxy.addr
	}
	return c.DirectAddr()
}

// DirectAddr is the container's published port.
func (c *Container) DirectAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.hostPort))
}

// ID is the Docker container id.
func (c *Container) ID() string { return c.res.Container.ID }

func (c *Container) NewClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: c.Addr(), MaxRetries: -1})
}
