package redlock

import (
	"context"
	_ "embed"
	"time"
)

// Unlock deletes the lock on every node where it still holds this lock's
// value, and closes Done. The release is sent even if ctx is already done:
// ctx bounds only how long Unlock waits for the answers. Nodes that cannot
// be reached are retried in the background for up to one TTL.
//
// Unlock returns once the outcome is decided, without waiting for the
// slowest nodes: their calls go on in the background. Another
// client that tries the name at once may still be refused by such a node,
// and win or lose by the others as with any contention; this client's own
// next attempt on the name sends its call to each node only after the
// release's call there has ended, so it is never refused for this lock's
// old value (its majority waits for those releases, not its failure).
//
// It returns nil if a majority deleted the lock. It returns a *QuorumError
// with Kind ErrExpired if the lock was no longer held on a majority: the
// critical section may have overlapped another holder. ErrUnavailable means
// too few nodes answered to tell, within the round's patience (see
// WithNodeTimeout) or before ctx ended; in the last case ctx's error is
// its Cause and the silent nodes are NodeTimedOut with an Err that wraps
// it. Later calls return the first call's result.
func (l *Lock) Unlock(ctx context.Context) error {
	return l.l.Release(ctx, func(start time.Time, nodes []NodeResult, err error) error {
		err = publicError(err)
		l.c.observe(ctx, "unlock", l.Name(), start, nodes, nil, l.Token(), time.Time{}, err)
		return err
	})
}
