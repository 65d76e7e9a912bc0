package redlock

import (
	"context"
	"slices"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

// Permit is one or more of a semaphore's permits, held together on a
// majority of the nodes: the lease of that many slots, with one validity
// and one token. Its methods are safe for concurrent use.
type Permit struct {
	c     *Client
	slots []int
	l     lease.Lease
}

// Slot is the permit's first slot, from 0 to the semaphore's permits less
// one: its only one unless it was taken by TryAcquireN or AcquireN for
// several.
func (p *Permit) Slot() int { return p.slots[0] }

// Slots are the permit's slots, in increasing order.
func (p *Permit) Slots() []int { return slices.Clone(p.slots) }

// Name is the permit's lease name: its slot's lock name,
// "<semaphore>#<slot>", under which to fence the protected resource per
// slot (the token order is per slot); for several slots, their names
// joined by commas (see Names).
func (p *Permit) Name() string { return p.l.Name() }

// Names are the lock names of the permit's slots, in the order of Slots:
// the fence marks under which its token is accepted.
func (p *Permit) Names() []string { return p.l.Names() }

// Token is the permit's fencing token: larger than every earlier token of
// each of its slots (committed as every slot's token at once, as a
// multi-lock's), so a fence that keeps one mark per slot refuses a paused
// holder of a slot once it has a newer one. 0 without fencing.
func (p *Permit) Token() uint64 { return p.l.Token() }

// ID returns the hold's id: the random value it holds on the nodes, one per
// acquisition (a reentrant hold shares its outer hold's). Inspect shows it
// as Holder: log it beside your process's identity, and an operator can
// tell from Inspect which process holds a name. The scripts release and
// extend only the value they are given, so keep it out of places others
// who can reach the nodes could read it from.
func (p *Permit) ID() string { return p.l.Value() }

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
