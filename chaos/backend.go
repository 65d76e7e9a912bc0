package chaos

import (
	"context"

	"github.com/quorumlock/redlock/node"
)

// Backend starts the nodes a run faults.
type Backend interface {
	Name() string
	// Start starts n nodes with link and clock faults enabled.
	Start(ctx context.Context, n int, p node.Persistence) (node.Group, error)
	// Store starts the protected store, which is never faulted.
	Store(ctx context.Context) (node.Node, error)
}

// Processes runs redis-server processes on loopback.
type Processes struct{}

func (Processes) Name() string { return "process" }

func (Processes) Start(ctx context.Context, n int, p node.Persistence) (node.Group, error) {
	return node.StartProcesses(ctx, n, node.Config{Persistence: p, Proxy: true, FakeClock: true})
}

func (Processes) Store(ctx context.Context) (node.Node, error) {
	return node.StartProcess(ctx, node.Config{Name: "store"})
}

// Containers runs each node in a Docker container. With no Image it builds
// one from the host's server (node.HostImage, or node.ValkeyHostImage when
// $REDLOCK_SERVER_BINARY is valkey-server), which supports clock
// faults; a named image (redis:7.2) does not, so the clock scenarios need
// the host image.
type Containers struct {
	Image string
}

func (Containers) Name() string { return "docker" }

func (c Containers) Start(ctx context.Context, n int, p node.Persistence) (node.Group, error) {
	return node.StartContainers(ctx, n, node.ContainerConfig{Image: c.Image,
		Config: node.Config{Persistence: p, Proxy: true, FakeClock: c.Image == ""}})
}

func (c Containers) Store(ctx context.Context) (node.Node, error) {
	return node.StartContainer(ctx, node.ContainerConfig{Image: c.Image, Config: node.Config{Name: "store"}})
}
