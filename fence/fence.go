// Package fence is the storage side of fencing tokens: the service that owns
// the protected data uses it to turn away operations from a lock holder that
// has been superseded.
//
// Each resource keeps the highest token it has admitted. An operation with a
// lower token is rejected (ErrStale) and nothing is written; an equal token
// is admitted (the same holder's later operations and retries); a higher
// token raises the mark. Admission and the operation must be one atomic
// step, or a stale write can slip in between: use Memory.Do, the fenced
// writes of Redis, Postgres.Do, or a single transaction in your own store.
//
// Fence reads too where the holder reads, decides and writes (a
// read-modify-write): otherwise a new holder's read can be followed by a
// stale write. Fencing orders critical sections; it does not make a
// multi-step critical section atomic.
package fence

import (
	"context"
	"errors"
	"fmt"
)

// Fence admits operations on resources in token order. Implementations are
// safe for concurrent use, and atomic per resource.
type Fence interface {
	// Admit records that an operation carrying token, from holder, is being
	// applied to resource. holder may be empty; when both the stored and the
	// given holder are known, an equal token from a different holder is
	// rejected with ErrTokenReused.
	Admit(ctx context.Context, resource string, token uint64, holder string) error
}

// ReadFence is a Fence that also admits the reads of a read-write lock's
// readers (redlock.RWMutex), with a second mark per resource: the highest
// read token admitted. A write (Admit) is admitted only if its token is at
// least both marks, a read (AdmitRead) only if its token is at least the
// write mark, and a read raises the read mark. Equality passes only for
// the mark's own holder (a writer reading its own data, or a downgraded
// writer), as Admit's does.
//
// Without the read mark a stale write gets through: a writer (token 6) is
// paused, its lease ends, a reader (token 7) reads, and then the writer's
// delayed write lands over the data the reader saw. With it the write is
// refused (6 is below the read mark 7). Readers' tokens are in no order
// among themselves, so a read below the read mark is still admitted: it
// does not conflict with another read. Reads that need no guarantee skip
// the fence.
type ReadFence interface {
	Fence
	// AdmitRead records that a read carrying token, from holder, is being
	// made of resource.
	AdmitRead(ctx context.Context, resource string, token uint64, holder string) error
}

// Errors. Admit returns *StaleTokenError and *ReusedTokenError values that
// match these with errors.Is.
var (
	ErrStale         = errors.New("fence: stale fencing token")
	ErrTokenReused   = errors.New("fence: the same fencing token from two holders")
	ErrZeroToken     = errors.New("fence: zero fencing token")
	ErrEmptyResource = errors.New("fence: empty resource name")

	// ErrTokenRange: a token above what the fence can store and compare
	// exactly: 2^63-1 (a bigint) for Postgres, MaxRedisToken (2^53-1) for
	// Redis. Nothing is written. Tokens from this module's lock client stay
	// below 2^53.
	ErrTokenRange = errors.New("fence: token out of the fence's range")

	// ErrBadTTL: Redis.Set was given a negative TTL. Nothing is written.
	ErrBadTTL = errors.New("fence: negative TTL")

	// ErrFenceKey: a Redis fenced write or read named a fence's own key
	// ("<prefix>:{<resource>}") as its data key; writing there would
	// destroy a mark. Nothing is written.
	ErrFenceKey = errors.New("fence: the data key is a fence key")

	// ErrNoFields: Redis.HSet was given no fields.
	ErrNoFields = errors.New("fence: HSet with no fields")
)

// StaleTokenError: the token is lower than the highest the resource has
// admitted. The operation was not applied.
type StaleTokenError struct {
	Resource string
	Token    uint64 // what the operation carried
	Highest  uint64 // what the resource had already admitted
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence: stale fencing token for %q: got %d, already admitted %d", e.Resource, e.Token, e.Highest)
}

func (e *StaleTokenError) Is(target error) bool { return target == ErrStale }

// ReusedTokenError: two holders presented the same token. Tokens are unique
// per acquisition, so a lock's assumptions were broken (a node lost its
// data, two deployments share a lock name). Report it loudly.
type ReusedTokenError struct {
	Resource     string
	Token        uint64
	Holder       string
	StoredHolder string
}

func (e *ReusedTokenError) Error() string {
	return fmt.Sprintf("fence: token %d for %q presented by %q but admitted for %q: token uniqueness is broken",
		e.Token, e.Resource, e.Holder, e.StoredHolder)
}

func (e *ReusedTokenError) Is(target error) bool { return target == ErrTokenReused }

func validate(resource string, token uint64) error {
	switch {
	case resource == "":
		return ErrEmptyResource
	case token == 0:
		return fmt.Errorf("%w for %q", ErrZeroToken, resource)
	}
	return nil
}
