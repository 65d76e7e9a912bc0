package lease

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// The read-write lock: per name, the writer's key RWKey (a lock key with
// the mutex's marker, queue and token H), the readers' sorted set beside
// it, one entry per reader with its own expiry, and HR, the largest
// reader token committed. A reader's lease is its entry; a writer's, the
// key. Release and Extend act on either, so a lease downgraded on some
// nodes and not others is still released and extended everywhere.

// rw is the Shape of one read-write lease.
type rw struct {
	mutex        // the writer's key, the marker of this value, the queue
	reader  bool // a read lease
	readers any  // the readers' sorted set
	hr      any  // HR
	phase   any  // RPHASE, RWAIT, RSEEN: the phase-fair rule's (lua/rw_phase.lua)
	wait    any
	seen    any
}

// RWKey is the writer's key of the read-write lock name: beside the mutex
// of the same name, not on it (a mutex knows no readers).
func RWKey(prefix, name string) string {
	key, _, _ := LockKeys(prefix, name)
	return key + ":rw"
}

// RWSettleName is what this client's releases of the read-write lock name
// are kept under (settle.go), its Request.Names: not name, the mutex's of
// the same name, whose keys are other keys (its releases in flight would
// count as the read-write lock's own, and the other way round). No lock
// name begins with '}'.
func RWSettleName(name string) string { return "}rw:" + name }

// ReadersKey is the readers' sorted set of the read-write lock whose
// writer's key is key.
func ReadersKey(key string) string { return key + ":readers" }

// ReadHighKey is HR, the largest reader token committed, of the read-write
// lock whose writer's key is key.
func ReadHighKey(key string) string { return key + ":fence:read" }

// PhaseKeys are the phase-fair rule's keys of the read-write lock whose
// writer's key is key: the phase counter, the waiting readers' phases and
// their liveness (lua/rw_phase.lua).
func PhaseKeys(key string) (phase, wait, seen string) {
	return key + ":rphase", key + ":rwait", key + ":rwait:seen"
}

// RW is the shape of a read (reader) or write lease on the read-write lock
// of the Request's Name.
func RW(reader bool) func(l *Lease, prefix, name, value string) Shape {
	return func(l *Lease, prefix, name, value string) Shape {
		key := RWKey(prefix, name)
		s := &rw{reader: reader, readers: ReadersKey(key), hr: ReadHighKey(key)}
		s.phase, s.wait, s.seen = PhaseKeys(key)
		s.initKey(key, value)
		return s
	}
}

// Reader tells a read lease's shape.
func Reader(s Shape) bool {
	r, ok := s.(*rw)
	return ok && r.reader
}

func (s *rw) Acquire(l *Lease, waitedUs int64) *nodescript.Call {
	e, k := l.e, s.keyArgs
	nk := &e.Keys
	switch {
	case s.reader && e.Fencing:
		return nodescript.NewCall(nodescript.FencedRWRead, []any{k[0], k[1], k[2], k[3], k[4], s.readers, HighKey(s.key),
			nk.Counter, nk.ID, nk.Replid, nk.Lost, nk.Roster, nk.MaxTTL, s.phase, s.wait, s.seen},
			s.value, l.term.Arg, l.list.Roster, e.Args.StaleWaiter, l.waiter)
	case s.reader:
		return nodescript.NewCall(nodescript.RWRead, []any{k[0], k[1], k[2], k[3], k[4], s.readers, HighKey(s.key), s.phase, s.wait, s.seen},
			s.value, l.term.Arg, "", e.Args.StaleWaiter, l.waiter)
	case e.Fencing:
		return nodescript.NewCall(nodescript.FencedRWWrite, []any{k[0], k[1], HighKey(s.key), nk.Counter, nk.ID, nk.Replid, nk.Lost,
			nk.Roster, nk.MaxTTL, k[2], k[3], k[4], s.readers, s.phase, s.wait, s.seen}, s.value, l.term.Arg, l.waiter, e.Args.StaleWaiter, waitedUs, l.list.Roster)
	}
	return nodescript.NewCall(nodescript.RWWrite, []any{k[0], k[1], k[2], k[3], k[4], s.readers, s.phase, s.wait, s.seen},
		s.value, l.term.Arg, l.waiter, e.Args.StaleWaiter, waitedUs)
}

func (s *rw) Commit(l *Lease, token int64) *nodescript.Call {
	nk := &l.e.Keys
	if s.reader {
		return nodescript.NewCall(nodescript.RWReadCommit, []any{HighKey(s.key), s.hr, nk.Counter, nk.Floor, nk.ID, nk.Replid, nk.Lost, nk.Roster},
			token, l.e.Args.Retention, s.value, l.list.Roster)
	}
	return nodescript.NewCall(nodescript.RWWriteCommit, []any{HighKey(s.key), nk.Counter, nk.Floor, nk.ID, nk.Replid, nk.Lost, nk.Roster, s.hr},
		token, l.e.Args.Retention, s.value, l.list.Roster)
}

func (s *rw) Release(l *Lease, markerTTL any, announce bool) *nodescript.Call {
	k := s.keyArgs
	writer := 1
	if s.reader {
		writer = 0
	}
	return nodescript.NewCall(nodescript.RWRelease, []any{k[0], k[1], k[2], k[3], k[4], s.readers, s.phase, s.wait, s.seen},
		s.value, markerTTL, announceArg(announce), l.waiter, l.e.Args.PromiseFor, writer)
}

func (s *rw) Extend(l *Lease, ttlArg any) *nodescript.Call {
	if l.e.Fencing {
		return nodescript.NewCall(nodescript.RWExtend, []any{s.keyArgs[0], s.readers, l.e.Keys.ID, l.e.Keys.MaxTTL}, s.value, ttlArg, 1)
	}
	return nodescript.NewCall(nodescript.RWExtend, []any{s.keyArgs[0], s.readers}, s.value, ttlArg, 0)
}

// Downgrade turns write lease l into a read lease on each node
// (lua/rw_downgrade.lua), in one round decided once a majority turned it or
// refused it. It returns nil if a majority turned it; a *verdict.Failure of Kind
// ErrExpired if a majority no longer held it, ErrWrongType if a node
// holds one of its keys as another type, ErrUnavailable otherwise (Cause:
// ctx's error if it cut the round short); or the engine's error on a
// closed client.
func (e *Engine) Downgrade(ctx context.Context, l *Lease) error {
	s := l.shape.(*rw)
	k := s.keyArgs
	call := nodescript.NewCall(nodescript.RWDowngrade, []any{k[0], s.readers, k[2], k[3], k[4], s.phase, s.wait, s.seen}, s.value, l.waiter)
	op := func(ctx context.Context, _ int, node redis.UniversalClient) (round.Outcome, int64, error) {
		o, v, err := Answer(ctx, call, node)
		if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return round.NodeFailed, 0, kind.WrongType(err)
		}
		return o, v, err
	}
	t, err := e.Rounds.Run(ctx, round.Spec{Name: "downgrade", Op: op}, (*round.Tally).WonOrRefused, nil)
	if t == nil {
		return err
	}
	if t.Won() {
		return nil
	}
	why := kind.ErrUnavailable
	switch {
	case t.RefusedByMajority():
		why = kind.ErrExpired
	case slices.ContainsFunc(t.Results, func(r round.NodeResult) bool { return errors.Is(r.Err, kind.ErrWrongType) }):
		why = kind.ErrWrongType
	}
	return &verdict.Failure{Op: "downgrade", Name: l.Name(), Kind: why, Cause: err, Nodes: t.Snapshot()}
}
