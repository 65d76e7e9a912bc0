package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

// Permit is one of a semaphore's permits, held on a majority of the nodes:
// the lease of one slot. Its methods are safe for concurrent use.
type Permit struct {
	c    *Client
	slot int
	l    lease.Lease
}

// Slot is the permit's slot, from 0 to the semaphore's permits less one.
func (p *Permit) Slot() int { return p.slot }

// Name is the slot's lock name, "<semaphore>#<slot>": fence the
// protected resource per slot under it (the token order is per slot).
func (p *Permit) Name() string { return p.l.Name() }

// Token is the permit's fencing token: larger than every earlier token of
// its slot, so a fence that keeps one mark per slot refuses a paused
// holder of the slot once it has a newer one. 0 without fencing.
func (p *Permit) Token() uint64 { return p.l.Token() }

// Until is the end of the permit's validity, as Lock.Until.
func (p *Permit) Until() time.Time { return p.l.Until() }

// Done closes when the permit's validity ends without a successful Extend,
// or at Release, as Lock.Done.
func (p *Permit) Done() <-chan struct{} { return p.l.Done() }

// Nodes returns what each node answered to the acquisition.
func (p *Permit) Nodes() []NodeResult { return append([]NodeResult(nil), p.l.Results()...) }

// Extend re-applies the permit's TTL, as Lock.Extend does. The nodes
// refuse it for a slot at or above the semaphore's size since a SetPermits
// shrank it: such a permit runs out at its validity (ErrExpired).
func (p *Permit) Extend(ctx context.Context, opts ...LockOption) error {
	return p.c.extend(ctx, &p.l, opts)
}

// Release gives the permit back on every node, as Lock.Unlock does.
func (p *Permit) Release(ctx context.Context) error { return p.c.release(ctx, &p.l) }
