package redlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/quorumlock/redlock/internal/batch"
)

// Defaults. The node timeout follows the Redis distributed-lock spec: a few
// tens of milliseconds, far below the TTL, so a dead node costs little.
const (
	DefaultTTL           = 10 * time.Second
	DefaultDriftFactor   = 0.01
	DefaultNodeTimeout   = 50 * time.Millisecond
	DefaultRetryDelayMin = 10 * time.Millisecond
	DefaultRetryDelayMax = 100 * time.Millisecond

	// DefaultMaxOutage is how long Lock keeps retrying attempts that fail
	// for other reasons than contention before it gives up (WithMaxOutage).
	DefaultMaxOutage = 15 * time.Second

	// DefaultRetention is how long a lock name's fencing state (H) outlives
	// its last acquisition. A day keeps per-name state to the names used in
	// the last day, while a node's clock would have to jump forward by most
	// of a day to break the lease order (docs/fencing.md, M2).
	DefaultRetention = 24 * time.Hour

	// MinTTL is the floor under every TTL New accepts (ErrTTLTooShort):
	// Redis expires keys with millisecond resolution, and below this the
	// drift allowance dominates. The TTL must also exceed what an
	// acquisition may spend, rounds × node timeout + drift (one round
	// without fencing, two with), or New fails with ErrNoValidityBudget:
	//
	//	TTL > (rounds × node timeout + 2ms) / (1 - drift factor)
	//
	// With the default node timeout (50 ms) and drift factor (0.01) the
	// shortest TTL New accepts is 104 ms with fencing and 53 ms without;
	// a TTL of 10 ms needs a node timeout below 3.9 ms with fencing. The
	// errors give the shortest TTL that works with the options given.
	MinTTL = 10 * time.Millisecond

	// MaxNameLength is the longest lock name, in bytes, that TryLock, Lock
	// and Do accept. Every name is copied into seven or more keys on every
	// node (the lock, its queue, its fencing counters, release markers) and into
	// pub/sub channels and error messages, so a name that is really a payload
	// costs memory and bandwidth on every node. 1 KiB holds any composite
	// identifier (a tenant, a table and a row; a URL path); hash longer ones.
	MaxNameLength = 1024

	// MaxTTL is the ceiling over every TTL (ErrTTLTooLong): a year. The
	// package derives durations from the TTL (twice it for the fencing
	// retention, ten times it for release markers), which must not
	// overflow; a lease of more than a year is a configuration mistake.
	MaxTTL = 365 * 24 * time.Hour

	// MinRetryDelay is the floor under the maximum retry delay
	// (ErrBadRetryDelay): below it, a waiter's attempts while the lock
	// is held are paced by the round trips alone, hundreds a second.
	MinRetryDelay = time.Millisecond

	// driftConstant is the fixed part of the drift allowance (redlock-rb,
	// the Redis spec): it covers the millisecond resolution of PX.
	driftConstant = 2 * time.Millisecond
)

// An Option configures a Client.
type Option func(*config)

type config struct {
	ttl           time.Duration
	driftFactor   float64
	nodeTimeout   time.Duration
	retryDelayMin time.Duration
	retryDelayMax time.Duration
	maxOutage     time.Duration
	keyPrefix     string
	logger        *slog.Logger
	observer      Observer
	clock         clock
	fencing       bool
	retention     time.Duration
	trace         *Trace
	batch         int // the most calls in one pipeline to a node; 0: none
}

func defaultConfig() config {
	return config{
		ttl:           DefaultTTL,
		driftFactor:   DefaultDriftFactor,
		nodeTimeout:   DefaultNodeTimeout,
		retryDelayMin: DefaultRetryDelayMin,
		retryDelayMax: DefaultRetryDelayMax,
		maxOutage:     DefaultMaxOutage,
		keyPrefix:     "redlock",
		clock:         systemClock{},
		fencing:       true,
		retention:     DefaultRetention,
		batch:         batch.MaxBatch,
	}
}

// WithTTL sets how long a lock lives on each node before Redis expires it,
// for every lock of the client that For does not set otherwise. It must lie
// within [MinTTL, MaxTTL] (ErrTTLTooShort, ErrTTLTooLong), and with fencing
// the retention must cover it (ErrRetentionTooShort: raise WithRetention).
// The validity a holder may rely on is shorter: it ends TTL minus the drift
// allowance after the acquisition began, so the caller gets TTL minus the
// time the acquisition took minus the drift allowance. New refuses a TTL
// that would leave no validity to an acquisition whose every round took a
// full node timeout (ErrNoValidityBudget; see MinTTL for the bound, which
// the error states for the options given).
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithDriftFactor sets the share of the TTL reserved for clock-rate
// differences between this process and the nodes. The drift allowance is
// TTL*factor + 2ms.
func WithDriftFactor(f float64) Option { return func(c *config) { c.driftFactor = f } }

// WithNodeTimeout sets how long a round waits for a node that stays silent
// while a majority of the nodes answers. A round stops waiting as soon as
// its outcome is decided. Until a majority has answered (every node late:
// an overloaded client machine, a burst of new connections, or a majority
// really down) it waits longer, up to its patience: the TTL less the drift
// allowance, capped at 5 seconds, or ten node timeouts if that is more.
// That is the longest one TryLock, Extend or Unlock round waits, and its
// calls may run that long, so that overload costs latency rather than
// failed attempts; go-redis's own read and dial timeouts, and ctx, can end
// it sooner (the error then still names every node's cause).
// The TTL must exceed rounds × node timeout + drift (MinTTL), where
// rounds is two with fencing: a longer node timeout needs a longer TTL.
// (An acquisition that takes longer than that, waiting on late nodes,
// fails with ErrNoValidity.)
func WithNodeTimeout(d time.Duration) Option { return func(c *config) { c.nodeTimeout = d } }

// WithRetryDelay sets the bounds of the random pause between attempts in
// Lock and Do. New refuses min < 0, max < min and max < MinRetryDelay
// (ErrBadRetryDelay). Clients that share a lock may use different bounds: a
// waiter keeps its place in the lock's queue for max plus two node
// timeouts after each attempt, as its own client set them.
func WithRetryDelay(min, max time.Duration) Option {
	return func(c *config) { c.retryDelayMin, c.retryDelayMax = min, max }
}

// WithMaxOutage bounds how long Lock (and so Do, and `redlock exec`) keeps
// retrying while its attempts fail for other reasons than contention:
// nodes down, paused, full, read-only or too few answering. Once every
// attempt for d has failed so, with no attempt in between lost to another
// owner, Lock returns the last attempt's *QuorumError: its Kind is why
// that attempt failed (ErrUnavailable, say), Nodes holds every node's
// outcome and cause, and GaveUpAfter how long the attempts had been
// failing. The bound is checked after each attempt, so Lock returns after
// at least d and at most d plus one pause (a second at most) and one
// attempt (the round's patience, see WithNodeTimeout). Contention does not
// count: an attempt refused because another owner holds the lock resets
// the bound, and Lock waits for a held lock until ctx ends. Failures that
// no retry fixes (see Lock) end Lock at once, whatever d.
//
// The default is DefaultMaxOutage (15 s). 0 turns the bound off: Lock then
// retries through an outage until ctx ends, as before. New refuses a
// negative d (ErrBadMaxOutage).
func WithMaxOutage(d time.Duration) Option { return func(c *config) { c.maxOutage = d } }

// WithKeyPrefix sets the namespace of every key the client writes
// (default "redlock"): the lock "orders:42" lives at "redlock:{orders:42}".
// Clients exclude each other only within one prefix. New refuses an empty
// prefix and one holding '{' or '}' (ErrBadKeyPrefix): a brace would let
// two prefixes share lock keys but not node ids.
func WithKeyPrefix(prefix string) Option { return func(c *config) { c.keyPrefix = prefix } }

// WithLogger makes the client log what an operator must know about: locks
// lost, extensions that failed, nodes that lost their fencing state
// (amnesiac), releases that could not reach a node. Nothing
// is logged on the success path. Without it the client logs nothing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithoutFencing turns fencing tokens off: an acquisition then takes one
// round trip instead of two, and Lock.Token returns 0. Use it only where the
// protected resource cannot check tokens anyway, or with Redis Cluster nodes.
func WithoutFencing() Option { return func(c *config) { c.fencing = false } }

// WithoutBatching sends every call to a node on its own, as one command on
// a pooled connection. By default, calls that any goroutine of the client
// makes to a node while another call to it is in flight go out together as
// one go-redis pipeline when that call returns (at most 512 in one), so
// many goroutines' locks cost about one round trip, and one fsync on
// appendfsync-always nodes, instead of one each: ten times the throughput
// at 64 goroutines and more. A lone call goes out at once either way. Each
// call keeps its own reply, error, node timeout and ctx: a call whose ctx
// ends before its batch leaves is never sent. Your go-redis hooks see a
// batch through ProcessPipelineHook, a lone call through ProcessHook.
func WithoutBatching() Option { return func(c *config) { c.batch = 0 } }

// WithRetention sets how long a fenced lock name's state (its highest
// committed token, one key per node) lives after the name's last
// acquisition; then the name leaves nothing behind. The tokens keep their
// guarantees across it (a counter per node carries them), provided no
// node's clock jumps forward by more than R - 2*TTL (docs/fencing.md).
// It must be at least 2*TTL + 2 node timeouts + the drift allowance
// (ErrRetentionTooShort). All clients of a deployment should use the same
// retention.
func WithRetention(r time.Duration) Option { return func(c *config) { c.retention = r } }

// minRetentionFor is the shortest retention the proof of M2 allows for a
// lease of ttl: H must outlive an acquisition that began before the commit
// by more than a TTL.
func (c *config) minRetentionFor(ttl time.Duration) time.Duration {
	return 2*ttl + 2*c.nodeTimeout + c.driftOf(ttl)
}

// patience is the longest a round waits for its nodes while fewer than a
// majority has answered (round.Engine.Run), and how long its calls may run: the TTL
// less the drift allowance (an acquisition that took longer could not hold
// a valid lock), but at most maxPatience, or ten node timeouts if that is
// more.
//
// A client cannot tell most nodes being down from its own machine being
// saturated (a dial burst, hundreds of goroutines on two cores): every
// reply is late in both. Rounds cut at a few node timeouts made overload
// metastable: 256 cold clients on one machine failed 30% of their attempts,
// each failure sent its rollback to the nodes, and immediate retries kept
// the queue long. Waiting costs a round that would fail anyway only time;
// the node's client bounds it further (go-redis's read and dial timeouts).
// A silent minority is still given up on at about the node timeout, once a
// majority has answered.
func (c *config) patience() time.Duration {
	return max(min(c.ttl-c.drift(), maxPatience), patienceFactor*c.nodeTimeout)
}

const (
	patienceFactor = 10
	maxPatience    = 5 * time.Second
)

// rounds is how many round trips an acquisition takes.
func (c *config) rounds() time.Duration {
	if c.fencing {
		return 2
	}
	return 1
}

func (c *config) drift() time.Duration { return c.driftOf(c.ttl) }

func (c *config) driftOf(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.driftFactor) + driftConstant
}

// leavesValidity: an acquisition under ttl whose every round took a full
// node timeout still has validity left. validate requires it.
func (c *config) leavesValidity(ttl time.Duration) bool {
	return c.rounds()*c.nodeTimeout+c.driftOf(ttl) < ttl
}

// minTTL is the shortest whole-millisecond TTL that validate accepts with
// c's node timeout, drift factor and fencing, for the error messages. The
// drift factor and node timeout must be valid.
func (c *config) minTTL() time.Duration {
	base := float64(c.rounds()*c.nodeTimeout + driftConstant)
	ttl := max(time.Duration(base/(1-c.driftFactor)).Truncate(time.Millisecond)-time.Millisecond, MinTTL)
	for range 1000 { // a few steps past the estimate, which float rounding can miss by one
		if c.leavesValidity(ttl) {
			break
		}
		ttl += time.Millisecond
	}
	return ttl
}

func (c *config) validate() error {
	switch {
	case c.driftFactor < 0 || c.driftFactor >= 1 || c.driftFactor != c.driftFactor:
		return fmt.Errorf("%w: got %v", ErrBadDriftFactor, c.driftFactor)
	case c.nodeTimeout <= 0:
		return fmt.Errorf("%w: got %v", ErrBadNodeTimeout, c.nodeTimeout)
	case c.retryDelayMin < 0 || c.retryDelayMax < c.retryDelayMin || c.retryDelayMax < MinRetryDelay:
		return fmt.Errorf("%w: min %v, max %v (max must be at least MinRetryDelay, %v)",
			ErrBadRetryDelay, c.retryDelayMin, c.retryDelayMax, MinRetryDelay)
	case c.maxOutage < 0:
		return fmt.Errorf("%w: got %v", ErrBadMaxOutage, c.maxOutage)
	}
	if err := c.validateTTL(c.ttl, "WithTTL"); err != nil {
		return err
	}
	return validateKeyPrefix(c.keyPrefix)
}

// validateTTL checks a lease TTL against the floor, the ceiling, the
// validity budget and the fencing retention: the client's (WithTTL) and
// every per-call one (For) alike. option names what sets it, for the
// messages. The drift factor and node timeout must be valid.
func (c *config) validateTTL(ttl time.Duration, option string) error {
	switch {
	case ttl < MinTTL:
		return fmt.Errorf("%w: %s(%v) is below the minimum %v; with node timeout %v and drift factor %v, "+
			"the shortest TTL that works is %v", ErrTTLTooShort, option, ttl, MinTTL, c.nodeTimeout, c.driftFactor, c.minTTL())
	case ttl > MaxTTL:
		// Checked before anything is computed from it: 2*TTL overflows.
		return fmt.Errorf("%w: %s(%v) is above the maximum, MaxTTL (%v)", ErrTTLTooLong, option, ttl, MaxTTL)
	case !c.leavesValidity(ttl):
		return fmt.Errorf("%w: %s(%v) must exceed %d round(s) of node timeout %v plus the drift "+
			"(TTL × %v + %v = %v); the shortest TTL that works with these is %v (or shorten the node timeout)",
			ErrNoValidityBudget, option, ttl, c.rounds(), c.nodeTimeout, c.driftFactor, driftConstant, c.driftOf(ttl), c.minTTL())
	case c.fencing && c.retention < c.minRetentionFor(ttl):
		return fmt.Errorf("%w: %s(%v) needs a fencing retention of at least 2*TTL + 2*node timeout + drift = %v, "+
			"and the retention is %v: raise it with WithRetention (the same on every client), or shorten the TTL",
			ErrRetentionTooShort, option, ttl, c.minRetentionFor(ttl), c.retention)
	}
	return nil
}
