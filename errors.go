package redlock

import (
	"errors"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
)

// Errors that describe why an operation on the quorum failed. A failed
// operation returns a *QuorumError whose Kind is one of these, so callers can
// test with errors.Is and still reach the per-node outcomes with errors.As.
var (
	// ErrLocked: a majority answered, but too few of them granted the lock,
	// because another owner holds it. Retrying later may succeed.
	ErrLocked = kind.ErrLocked

	// ErrUnavailable: too few nodes answered in time to decide. Retrying
	// later may succeed once the nodes are reachable again.
	ErrUnavailable = kind.ErrUnavailable

	// ErrNoValidity: a majority granted the lock, but the attempt took so long
	// that no validity was left once elapsed time and clock drift were
	// subtracted from the TTL. The lock was released everywhere.
	ErrNoValidity = kind.ErrNoValidity

	// ErrExpired: the lock was no longer held by this owner on a majority of
	// the nodes when Extend or Unlock ran, or its validity had already passed.
	// The critical section may have overlapped with another holder.
	ErrExpired = kind.ErrExpired

	// ErrReleased: Extend was called on a lock that was already unlocked.
	ErrReleased = kind.ErrReleased

	// ErrSuperseded: a fenced acquisition found, while committing its
	// token, that a newer token had been committed. It was rolled back; Lock
	// retries it.
	ErrSuperseded = kind.ErrSuperseded

	// ErrAmnesia: a node has no fencing identity in a provisioned deployment;
	// it lost its data, or is new. It is left out of quorums until Repair.
	ErrAmnesia = kind.ErrAmnesia

	// ErrNotProvisioned: a majority of the nodes hold no fencing identity.
	// Either nobody provisioned the deployment (call Client.Provision, or
	// `redlock provision`, once at deploy time), or a majority lost their
	// data, an outage that needs an operator (Client.Reprovision,
	// docs/operations.md). Lock gives up at once.
	ErrNotProvisioned = kind.ErrNotProvisioned

	// ErrRepairTooSoon: Repair found the node out for less than the longest
	// TTL in use (see RepairTooSoonError, which says how long to wait).
	ErrRepairTooSoon = kind.ErrRepairTooSoon

	// ErrTokenRange: a token argument is not below 2^53.
	ErrTokenRange = kind.ErrTokenRange

	// ErrNodeIDConflict: two nodes have the same fencing id, or ids and
	// uuids disagree. Tokens are not safe until an operator fixes it.
	ErrNodeIDConflict = kind.ErrNodeIDConflict

	// ErrWrongNodeList: the client's node list is not the deployment's: a
	// subset or a superset of it, one server under two addresses, nodes of
	// two deployments (see NodeListError, which says which nodes). Lock
	// gives up at once: the list is a configuration error.
	ErrWrongNodeList = kind.ErrWrongNodeList

	// ErrWrongType: a node holds a key of another type under one of the
	// lock's key names (the lock key, or the name's fence:high). That is a
	// configuration error (a key-name clash), not contention. The node's
	// error is a *WrongTypeError, which names the key.
	ErrWrongType = kind.ErrWrongType

	// ErrAuth: so many nodes refused the client's credentials (NOAUTH, or
	// "ERR Protocol error: unauthenticated multibulk length" to a script
	// sent before AUTH: the node wants a password and got none; WRONGPASS:
	// a wrong user name or password) that the others cannot form a majority. Lock gives up at
	// once: no retry fixes a configuration error. Each node's reply is in
	// its NodeResult.Err and in the message.
	ErrAuth = kind.ErrAuth

	// ErrNoPermission: so many nodes refused a command, key or channel to
	// the client's ACL user (NOPERM, or a script's call denied by the ACL)
	// that the others cannot form a majority. docs/operations.md gives the
	// ACL the client needs. Lock gives up at once.
	ErrNoPermission = kind.ErrNoPermission

	// ErrScript: so many nodes failed the client's Lua script itself (it
	// did not compile, or stopped with a runtime error: a server too old
	// or too different for it) that the others cannot form a majority. Lock
	// gives up at once. Errors a node raises while the script runs that a
	// retry can outlive, such as OOM, BUSY or LOADING, are not script errors.
	ErrScript = kind.ErrScript

	// ErrLockLost is the cause of the context that Do passes to its function
	// when the lock could not be kept: read it with context.Cause.
	ErrLockLost = kind.ErrLockLost

	// ErrNodeTimeout is the Err of a NodeResult whose node did not answer
	// within the node timeout. A node that did not answer because it
	// cannot be reached (its last dial failed, say with "connection
	// refused") is NodeFailed with the dial error instead.
	ErrNodeTimeout = round.ErrNodeTimeout

	// ErrNodeHung is the Err of a NodeResult whose call was not sent at all
	// (its Outcome is NodeTimedOut): the node has left earlier calls
	// unanswered for longer than the node timeout while a majority of the
	// other nodes answered, as a paused or hung process does. It matches
	// ErrNodeTimeout too. The node gets calls again
	// as soon as it answers one. A node skipped so whose last dial failed
	// (a refused connection) is NodeFailed with that dial error instead.
	ErrNodeHung = round.ErrNodeHung

	// ErrBadNode is the Err of a NodeResult whose go-redis client panicked
	// (a zero redis.Client{}, say): a configuration error.
	ErrBadNode = round.ErrBadNode

	// ErrEmptyName: the lock name is empty.
	ErrEmptyName = errors.New("redlock: empty lock name")

	// ErrNameTooLong: the lock name is longer than MaxNameLength bytes.
	ErrNameTooLong = errors.New("redlock: lock name too long")

	// ErrBadName: the lock name begins with '}'. Its keys would have an empty
	// hash tag, which Redis Cluster ignores, hashing each key whole, so the
	// keys of one lock would land in different slots.
	ErrBadName = errors.New("redlock: lock name begins with '}'")

	// ErrBadID: Resume was given an ID that no hold can have (empty, or not
	// the 32 lowercase hexadecimal digits of a lock's ID()).
	ErrBadID = errors.New("redlock: not a lock ID")

	// ErrClosed: the Client was closed.
	ErrClosed = round.ErrClosed
)

// Errors returned by New for invalid configuration, each wrapped with the
// offending value.
var (
	ErrNoNodes           = errors.New("redlock: no nodes")
	ErrNilNode           = errors.New("redlock: nil node")
	ErrDuplicateNode     = kind.ErrDuplicateNode
	ErrTTLTooShort       = errors.New("redlock: TTL too short")
	ErrBadDriftFactor    = errors.New("redlock: drift factor must be in [0, 1)")
	ErrBadNodeTimeout    = errors.New("redlock: node timeout must be positive")
	ErrNoValidityBudget  = errors.New("redlock: drift and node timeout leave no validity within the TTL")
	ErrBadRetryDelay     = errors.New("redlock: retry delays must satisfy 0 <= min <= max")
	ErrRetentionTooShort = errors.New("redlock: fencing retention too short")
	ErrBadMaxOutage      = errors.New("redlock: max outage must not be negative (0 turns the bound off)")
	ErrTooManyNodes      = errors.New("redlock: fencing supports at most 256 nodes")
	// ErrFencingNode is also the Kind of a *QuorumError when so many nodes
	// answered CROSSSLOT that the others cannot form a majority: they are
	// Redis Cluster nodes given as plain clients, whose slots the fenced
	// scripts' keys span. Lock gives up at once.
	ErrFencingNode  = kind.ErrFencingNode
	ErrBadKeyPrefix = errors.New("redlock: key prefix must be non-empty and hold no '{' or '}'")
	ErrTTLTooLong   = errors.New("redlock: TTL too long")
	// ErrNilOption: a nil Option (New), LockOption (TryLock, Lock, Do,
	// Extend) or RepairOption (Repair), wrapped with its position.
	ErrNilOption = errors.New("redlock: nil option")
	// ErrNilFunc: Do was given a nil function; it acquires nothing.
	ErrNilFunc = errors.New("redlock: nil function")
	// ErrCannotReenter: Reentrant was given to an acquisition that has no
	// reentry (TryLockMulti, LockMulti, DoMulti, a semaphore's permits),
	// wrapped with the call. Nothing is sent.
	ErrCannotReenter = errors.New("redlock: Reentrant applies to TryLock, Lock, Do and the read-write lock's holds, not to this call")
	// ErrNoLeader: Election.Leader found no leader held on a majority of
	// the nodes (nobody leads, or the leadership is changing hands).
	ErrNoLeader = errors.New("redlock: no leader")
	// ErrNotLeader: a Leadership was asked to proclaim after it ended
	// (resigned or lost), or the nodes no longer hold it on a majority.
	ErrNotLeader = errors.New("redlock: not the leader")
	// ErrResigned is the cause of a Leadership's context after Resign.
	ErrResigned = errors.New("redlock: leadership resigned")
	// ErrNotForExtend: an option that applies to acquisitions only
	// (Reentrant) was given to Extend, wrapped.
	ErrNotForExtend = errors.New("redlock: option applies to an acquisition, not to Extend")
	// ErrPermits: the nodes store another number of permits for the
	// semaphore than the client's (clients built with different numbers,
	// or a request for more permits than a SetPermits since left), or
	// SetPermits met a concurrent one: the Kind of a *QuorumError whose
	// nodes hold a *PermitsError. A Semaphore that hears of a later size
	// adopts it and tries once more before saying so; no retry fixes it
	// after that, and Acquire gives up at once.
	ErrPermits = kind.ErrPermits
	// ErrBadPermits: a semaphore's number of permits is not within 1 to
	// MaxPermits.
	ErrBadPermits = errors.New("redlock: a semaphore needs 1 to MaxPermits permits")
	// ErrHeldByContext: a waiting Lock (or Do, RLock, a read-write
	// lock's Lock) was asked through a context that already holds that
	// lock, and would wait for itself. Pass Reentrant to reenter it. A
	// waiting multi-lock (LockMulti, DoMulti) asked through a context that
	// holds one of its members fails so too; it cannot reenter.
	ErrHeldByContext = errors.New("redlock: the lock is held through this context (Reentrant reenters it)")
	// ErrUpgrade: a read hold of a read-write lock cannot become a write
	// hold (RWLock.Upgrade, or a write hold asked through a context that
	// carries a read hold of the same lock): two readers upgrading at once
	// would deadlock. Unlock, then Lock.
	ErrUpgrade = errors.New("redlock: a read hold cannot be upgraded to a write hold")
	// ErrReadUnderWrite: a read hold was asked through a context that
	// carries a write hold of the same lock, which it would wait for. Use
	// the write hold, or Downgrade it.
	ErrReadUnderWrite = errors.New("redlock: a read hold asked under this context's write hold")
	// ErrSpansSlots: on Redis Cluster or Ring nodes, a multi-lock's
	// members, or a semaphore's slots and size, would fall in different
	// hash slots, which one script cannot reach there. Give the names a
	// common hash tag (a multi-lock's "t}a" and "t}b"; a semaphore name
	// with a '}', "jobs}"), or use standalone or Sentinel nodes. Refused
	// before anything is sent.
	ErrSpansSlots = errors.New("redlock: the keys span hash slots, which Cluster and Ring nodes cannot run in one script")
	// ErrDowngradeReentered: Downgrade of a write hold with open reentries
	// (Reentrant), or of a reentry: the frames that reentered still write.
	ErrDowngradeReentered = errors.New("redlock: a write hold with open reentries cannot be downgraded")
	// ErrNoNames: a multi-lock was given no names.
	ErrNoNames = errors.New("redlock: a multi-lock needs at least one name")
	// ErrTooManyNames: a multi-lock was given more than MaxMultiNames names.
	ErrTooManyNames = errors.New("redlock: too many names for one multi-lock")
	// ErrDuplicateName: a multi-lock was given the same name twice.
	ErrDuplicateName = errors.New("redlock: a multi-lock was given the same name twice")
)

// WrongTypeError is a node's refusal of a lock whose keys include one that
// holds another type than the string the library keeps there: a key-name
// clash (another application writes under the client's key prefix) or a
// key written by hand. No retry fixes it. It matches ErrWrongType, and
// names the key when the node said which (every key the fenced scripts
// read as a string: the lock key and the name's fence:high): its fields
// are Key, the key ("" if the node did not say which), Type, what it holds
// ("list", "hash"...; "" if not said), and Err, the node's reply.
type WrongTypeError = kind.WrongTypeError

// PermitsError is a node's refusal of a semaphore's permit because it
// stores another number of permits for the semaphore (Stored) than the
// client's. It matches ErrPermits; Err is the node's reply.
type PermitsError = kind.PermitsError
