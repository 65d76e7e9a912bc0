package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
)

// Kill sends SIGKILL to the container and waits until it has stopped.
func (c *Container) Kill(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != running && c.state != paused {
		return fmt.Errorf("%w: node %s is not running", ErrState, c.cfg.Name)
	}
	if c.state == paused {
		// A frozen container cannot take a signal in every engine; thaw it
		// first, the kill still lands before it runs anything.
		_ = c.pool.Client.UnpauseContainer(c.ID())
	}
	if err := c.pool.Client.KillContainer(dc.KillContainerOptions{ID: c.ID(), Signal: dc.SIGKILL, Context: ctx}); err != nil {
		return fmt.Errorf("node %s: kill: %w", c.cfg.Name, err)
	}
	for {
		info, err := c.pool.Client.InspectContainer(c.ID())
		if err != nil {
			return err
		}
		if !info.State.Running {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	c.state = stopped
	return nil
}

// Start starts a killed container again, with the data in its mounted dir.
func (c *Container) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case closed:
		return ErrClosed
	case running, paused:
		return fmt.Errorf("%w: node %s is already running", ErrState, c.cfg.Name)
	}
	if err := c.pool.Client.StartContainer(c.ID(), nil); err != nil {
		return fmt.Errorf("node %s: start: %w", c.cfg.Name, err)
	}
	c.state = running
	return c.waitReady(ctx)
}

// WipeData deletes the stopped node's persisted data.
func (c *Container) WipeData() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stopped {
		return fmt.Errorf("%w: stop node %s before wiping its data", ErrState, c.cfg.Name)
	}
	data := filepath.Join(c.dir, "data")
	entries, err := os.ReadDir(data)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
			return fmt.Errorf("node %s: wipe: %w", c.cfg.Name, err)
		}
	}
	return nil
}

// Pause freezes the container (docker pause, the cgroup freezer).
func (c *Container) Pause(context.Context) error {
	return c.transition(running, paused, c.pool.Client.PauseContainer)
}

// Resume thaws it (docker unpause).
func (c *Container) Resume(context.Context) error {
	return c.transition(paused, running, c.pool.Client.UnpauseContainer)
}

func (c *Container) transition(from, to procState, do func(string) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != from {
		return fmt.Errorf("%w: node %s", ErrState, c.cfg.Name)
	}
	if err := do(c.ID()); err != nil {
		return fmt.Errorf("node %s: %w", c.cfg.Name, err)
	}
	c.state = to
	return nil
}

// Close removes the container and its data.
func (c *Container) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == closed {
		return nil
	}
	c.state = closed
	c.closeRelay()
	err := c.pool.Purge(c.res)
	return errors.Join(err, os.RemoveAll(c.dir))
}
