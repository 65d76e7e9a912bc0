// Package node starts real Redis servers for tests, demos and the chaos
// harness, and injects faults into them.
//
// A Node is one server. The process backend (StartProcess) runs
// redis-server on a free loopback port in its own temporary directory; the
// container backend (StartContainer) runs it in Docker. Every backend offers
// the same fault controls, so a scenario written against Node runs on any of
// them. Link faults go through Toxiproxy, embedded in this process in front
// of the node (Config.Proxy).
//
// The lock client never imports this package: it is a test fixture.
package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one Redis server under a test's control. Methods are safe for
// concurrent use.
type Node interface {
	// Name identifies the node in logs and reports.
	Name() string
	// Addr is the host:port a client on this machine dials.
	Addr() string
	// NewClient returns a new go-redis client for the node; the caller closes it.
	NewClient() *redis.Client

	// Kill stops the server at once (SIGKILL): no shutdown, no final fsync.
	Kill(ctx context.Context) error
	// Start starts a killed node again on the same address, with whatever
	// data it had persisted.
	Start(ctx context.Context) error
	// WipeData deletes the node's persisted data. The node must be stopped,
	// so that the next Start comes back empty (amnesia).
	WipeData() error
	// Pause freezes the server (SIGSTOP). The kernel still accepts
	// connections and buffers commands, which run when it resumes.
	Pause(ctx context.Context) error
	// Resume continues a paused server (SIGCONT).
	Resume(ctx context.Context) error

	// Link faults act on the node's embedded Toxiproxy (Config.Proxy).

	// Cut isolates the node from every client until Heal: bytes are held,
	// not dropped, and delivered after Heal, as TCP retransmission does.
	Cut(ctx context.Context) error
	// ResetPeer resets every connection that carries a byte, after waiting
	// after, until Heal.
	ResetPeer(ctx context.Context, after time.Duration) error
	// HalfOpen drops every byte without closing connections (closeAfter 0)
	// or closes each closeAfter after the fault reaches it, until Heal.
	HalfOpen(ctx context.Context, closeAfter time.Duration) error
	// Heal ends a Cut, ResetPeer or HalfOpen.
	Heal(ctx context.Context) error
	// SetLatency adds d of delay each way to every exchange with the node; 0 removes it.
	SetLatency(ctx context.Context, d time.Duration) error
	// SetJitter adds latency plus or minus up to jitter each way; zeros remove it.
	SetJitter(ctx context.Context, latency, jitter time.Duration) error
	// SetBandwidth limits each direction to kbPerSec KB/s; 0 removes it.
	SetBandwidth(ctx context.Context, kbPerSec int) error
	// SetSlicing delivers bytes in pieces of about averageBytes, delay
	// apart; 0 removes it.
	SetSlicing(ctx context.Context, averageBytes int, delay time.Duration) error
	// JumpClock moves the node's wall clock by d, forwards or backwards, on
	// top of earlier jumps. Redis expires keys by this clock.
	JumpClock(ctx context.Context, d time.Duration) error

	// Close stops the node for good and deletes its data.
	Close() error
}

// Persistence is how a node keeps its data across a restart.
type Persistence int

const (
	// PersistNone keeps nothing: a restarted node comes back empty.
	PersistNone Persistence = iota
	// PersistAOFEverySec fsyncs the append-only file once a second; a kill
	// can lose the last second of writes.
	PersistAOFEverySec
	// PersistAOFAlways fsyncs before every reply.
	PersistAOFAlways
)

func (p Persistence) String() string {
	switch p {
	case PersistNone:
		return "none"
	case PersistAOFEverySec:
		return "aof-everysec"
	case PersistAOFAlways:
		return "aof-always"
	}
	return fmt.Sprintf("Persistence(%d)", int(p))
}

func (p Persistence) args() []string {
	switch p {
	case PersistAOFEverySec:
		return []string{"--appendonly", "yes", "--appendfsync", "everysec"}
	case PersistAOFAlways:
		return []string{"--appendonly", "yes", "--appendfsync", "always"}
	default:
		return []string{"--appendonly", "no"}
	}
}

// Errors.
var (
	// ErrRedisServerMissing: no server binary was found (redis-server, or
	// the one Config.Binary or $REDLOCK_SERVER_BINARY names).
	// The error wrapping it names the binary looked for.
	ErrRedisServerMissing = errors.New("node: server binary not found in PATH; install it with " +
		"`make deps` (redis-server) or `make deps-valkey` (valkey-server)")
	// ErrState: the fault does not apply in the node's current state (for
	// example Resume on a node that is not paused).
	ErrState = errors.New("node: wrong state for this operation")
	// ErrNotEnabled: the fault needs an option the node was not started
	// with (Config.Proxy for links, Config.FakeClock for clocks).
	ErrNotEnabled = errors.New("node: fault not enabled for this node")
	// ErrClosed: the node was closed.
	ErrClosed = errors.New("node: closed")
)

type procState int

const (
	stopped procState = iota
	running
	paused
	closed
)
