package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
)

// A LockOption sets something for one lock: given to TryLock, Lock or Do
// it applies to that acquisition, given to Extend to that extension. For
// is the only one so far.
type LockOption func(*term)

// For sets the lock's TTL for this one call, in place of the client's
// (WithTTL): c.Lock(ctx, "report", redlock.For(time.Minute)) takes the lock
// for a minute, and l.Extend(ctx, redlock.For(time.Minute)) re-applies a
// minute from the start of the Extend call, shorter or longer than before.
//
// It is checked as WithTTL is, against the client's node timeout, drift
// factor and fencing retention, before anything is sent: ErrTTLTooShort,
// ErrTTLTooLong, ErrNoValidityBudget or ErrRetentionTooShort, wrapped, not
// a *QuorumError. The validity follows it as it follows the client's TTL
// (Until is start + ttl - drift, the drift being ttl × drift factor + 2ms),
// and so do Done's margin and Do's extension interval (a third of it).
//
// With fencing, every node that grants or extends a lock records the
// longest TTL it was given (its "longest TTL in use"), and a Repair of a
// node that lost its data waits that long: a lease longer than the other
// clients' makes repairs of its nodes wait longer, never too little.
func For(ttl time.Duration) LockOption {
	return func(ls *term) { ls.ttl, ls.arg = ttl, nil }
}

// term is one lock's TTL, and its milliseconds boxed once for the scripts.
type term struct {
	ttl       time.Duration
	arg       any
	reentrant bool // Reentrant
}

// defaultLease is the client's TTL, as WithTTL set it.
func (c *Client) defaultLease() term { return term{ttl: c.cfg.ttl, arg: c.args.ttl} }

// leaseOf applies opts to base and checks the TTL they set. A nil option
// is ErrNilOption.
func (c *Client) leaseOf(base term, opts []LockOption) (term, error) {
	ls := base
	for i, o := range opts {
		if o == nil {
			return term{}, fmt.Errorf("%w: opts[%d]", ErrNilOption, i)
		}
		o(&ls)
	}
	if ls.arg != nil {
		return ls, nil // base, unchanged
	}
	if err := c.cfg.validateTTL(ls.ttl, "For"); err != nil {
		return term{}, err
	}
	ls.arg = ls.ttl.Milliseconds()
	return ls, nil
}

// validity is how long after an operation's start a lease of ttl is
// valid: the TTL less the drift allowance.
func (c *config) validity(ttl time.Duration) time.Duration { return ttl - c.driftOf(ttl) }

// extend is every primitive's Extend of lease l (Lock.Extend states the
// contract): one at a time, opts checked before anything is sent, the
// warning logged and the observer told.
func (c *Client) extend(ctx context.Context, l *lease.Lease, opts []LockOption) error {
	done, err := l.ExtendTurn(ctx)
	if err != nil {
		return publicError(err)
	}
	defer done()
	ls := term{ttl: l.TTL()}
	if len(opts) > 0 {
		if ls, err = c.leaseOf(ls, opts); err != nil {
			return err
		}
		if ls.reentrant {
			return fmt.Errorf("%w: Reentrant, given to Extend", ErrNotForExtend)
		}
	} else {
		ls.arg = ls.ttl.Milliseconds()
	}
	start := c.cfg.clock.Now()
	until, nodes, err := l.Extend(ctx, start, lease.Term{TTL: ls.ttl, Arg: ls.arg})
	err = publicError(err)
	if err != nil && !errors.Is(err, ErrReleased) {
		c.log.Warn("redlock: extension failed", "lock", l.Name(), "err", err)
	}
	c.observe(ctx, "extend", l.Name(), start, nodes, nil, l.Token(), until, err)
	return err
}

// release is every primitive's release of lease l (Lock.Unlock states the
// contract), reported to the observer.
func (c *Client) release(ctx context.Context, l *lease.Lease) error {
	return l.Release(ctx, func(start time.Time, nodes []NodeResult, err error) error {
		err = publicError(err)
		c.observe(ctx, "unlock", l.Name(), start, nodes, nil, l.Token(), time.Time{}, err)
		return err
	})
}

// Resume returns a handle on the hold of the lock called name whose ID()
// is id, taken by another process or an earlier run of this one: a job
// handed from the process that took its lock to the one that runs it, or
// a process that restarted with the ID it had saved. The handle extends,
// unlocks and fences as the original does (Extend, Unlock, Token, Done);
// Resume itself extends the hold by its TTL (For, or the client's) on a
// majority, which proves it is still held under id, and its validity runs
// from that extension. The token is the one the nodes committed for the
// name, which is the hold's own while id holds it.
//
// An ID is a capability: whoever has it can extend and release that hold
// as its taker can, so treat it as you treat the credentials of the nodes
// (pass it over a trusted channel, never log it where the holder's peers
// read it). Two processes with one ID are one holder to the nodes: they
// must agree which of them writes, as two goroutines with one Lock must.
// The original handle does not learn of Resume, and its Until no longer
// bounds the hold: the nodes keep it for the TTL of the latest extension
// by either handle, Resume's included, so a Resume with a shorter TTL than
// the original's ends the hold on the nodes before the original's Until.
// Resuming hands the hold over: the original's holder stops using its
// handle (no writes, no Extend), as a scheduler that passed a job on does.
// The token stays readable for as long as the hold is kept extended: each
// extension renews the name's committed token on the nodes.
//
// It fails with ErrExpired if id no longer holds the lock on a majority
// (it was released, expired or revoked), with ErrBadID or a name error
// before anything is sent, and as Extend fails otherwise.
func (c *Client) Resume(ctx context.Context, name, id string, opts ...LockOption) (*Lock, error) {
	ls, err := c.leaseOf(c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	if !isLockID(id) {
		return nil, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	info, err := c.Inspect(ctx, name)
	if err != nil {
		return nil, err
	}
	if !info.Held || info.Holder != id {
		return nil, &QuorumError{Op: "resume", Name: name, Kind: ErrExpired, Nodes: inspectResults(info)}
	}
	lk := &Lock{c: c}
	_, err = c.leases.Adopt(ctx, &lk.l, lease.Request{Name: name, Term: lease.Term{TTL: ls.ttl, Arg: ls.arg},
		Prefix: c.cfg.keyPrefix, Shape: lease.Mutex}, id, info.Token)
	if err != nil {
		return nil, publicError(err)
	}
	return lk, nil
}

// isLockID: the 32 lowercase hexadecimal digits of nodescript.NewValue.
func isLockID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, r := range id {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// inspectResults turns an Inspect's answers into the outcomes a
// QuorumError lists: NodeGranted where the node answered.
func inspectResults(info LockInfo) []NodeResult {
	out := make([]NodeResult, len(info.Nodes))
	for i, n := range info.Nodes {
		out[i] = NodeResult{Node: i, Outcome: NodeGranted, Err: n.Err, Latency: n.Latency}
		if n.Err != nil {
			out[i].Outcome = NodeFailed
		}
	}
	return out
}

// Resume returns a handle on the permit whose ID() is id, taken by another
// process or an earlier run of this one (Redisson's
// RPermitExpirableSemaphore permit ids): it extends the permit by its TTL
// (For, or the client's) on a majority, keeps its slots and token, and
// extends and releases it as its taker's handle would. It is
// Client.Resume's, for a permit: the ID is a capability, and the same
// caveats hold. It fails with ErrExpired if no permit is held under id on
// a majority, and with ErrBadID before anything is sent for an ID no
// permit can have.
func (s *Semaphore) Resume(ctx context.Context, id string, opts ...LockOption) (*Permit, error) {
	c := s.c
	ls, err := c.leaseOf(c.defaultLease(), opts)
	if err != nil {
		return nil, err
	}
	if !isLockID(id) {
		return nil, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	info, err := s.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(info.Holders, func(h PermitHold) bool { return h.Holder == id })
	if i < 0 {
		return nil, &QuorumError{Op: "resume", Name: s.name, Kind: ErrExpired}
	}
	hold := info.Holders[i]
	z := s.size.Load()
	p := &Permit{c: c, slots: hold.Slots}
	var names []string
	if len(hold.Slots) > 1 {
		names = lease.SlotNames(s.name, hold.Slots)
	}
	_, err = c.leases.Adopt(ctx, &p.l, lease.Request{Name: lease.PermitName(s.name, hold.Slots),
		Term: lease.Term{TTL: ls.ttl, Arg: ls.arg}, Prefix: c.cfg.keyPrefix,
		Shape: lease.Permit(s.name, hold.Slots, z.k, z.version), Names: names}, id, hold.Token)
	if err != nil {
		return nil, publicError(err)
	}
	return p, nil
}
