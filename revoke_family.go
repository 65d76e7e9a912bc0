package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumlock/redlock/internal/lease"
)

// Revoke releases every hold of the read-write lock, whoever holds it:
// the writer's and each reader's, as their Unlocks would (the phase-fair
// rule included: readers that waited for the write are admitted before
// the writers queued). It is Client.Revoke's, for a read-write lock, with
// the same guarantees and the same caveat: it does not stop the revoked
// holders, and without a fence nothing keeps their late writes out.
// Holder is the writer revoked, Readers the readers; Revoked and Nodes
// are Client.Revoke's only. A hold that ends by itself meanwhile is not
// an error.
func (m *RWMutex) Revoke(ctx context.Context) (Revocation, error) {
	rv := Revocation{Name: m.name}
	info, err := m.Inspect(ctx)
	if err != nil {
		return rv, err
	}
	c := m.c
	revoke := func(reader bool, id string) error {
		hold := &RWLock{c: c}
		hold.reading.Store(reader)
		return c.revokeHold(ctx, &hold.l, lease.Request{Name: m.name, Names: []string{lease.RWSettleName(m.name)}, Prefix: c.cfg.keyPrefix, Shape: lease.RW(reader)}, id)
	}
	if info.Write.Held {
		if err := revoke(false, info.Write.Holder); err != nil {
			return rv, err
		}
		rv.Holder = info.Write.Holder
	}
	for _, r := range info.Readers {
		if err := revoke(true, r.Holder); err != nil {
			return rv, err
		}
		rv.Readers = append(rv.Readers, r.Holder)
	}
	return rv, nil
}

// Revoke releases the permit whose ID() is id, whoever holds it, as its
// Release would: its slots go to the longest waiters in the line. It is
// Client.Revoke's, for a permit, with the same guarantees and caveat.
// Holder is id if the permit was held, "" if not (not an error); ErrBadID
// before anything is sent for an ID no permit can have.
func (s *Semaphore) Revoke(ctx context.Context, id string) (Revocation, error) {
	rv := Revocation{Name: s.name}
	if !isLockID(id) {
		return rv, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	p, err := s.Resume(ctx, id)
	if errors.Is(err, ErrExpired) {
		return rv, nil
	}
	if err != nil {
		return rv, err
	}
	if err := p.Release(ctx); err != nil && !errors.Is(err, ErrExpired) {
		return rv, err
	}
	rv.Holder = id
	s.c.log.Warn("redlock: permit revoked", "semaphore", s.name, "holder", id, "slots", p.slots)
	return rv, nil
}

// revokeHold adopts the hold id of r's shape and releases it. A hold
// already gone is not an error.
func (c *Client) revokeHold(ctx context.Context, l *lease.Lease, r lease.Request, id string) error {
	ls := c.defaultLease()
	r.Term = lease.Term{TTL: ls.ttl, Arg: ls.arg}
	if _, err := c.leases.Adopt(ctx, l, r, id, 0); err != nil {
		if err = publicError(err); errors.Is(err, ErrExpired) {
			return nil
		}
		return err
	}
	if err := c.release(ctx, l); err != nil && !errors.Is(err, ErrExpired) {
		return err
	}
	c.log.Warn("redlock: lock revoked", "lock", r.Name, "holder", id)
	return nil
}
