package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The read mark of the Postgres fence (ReadFence): the highest read token
// admitted for a resource, in a row of its own in "<table>_read". A read
// raises it at once, in a statement of its own that commits, and then
// checks the write mark under a share lock on the write mark's row, held
// until the reading transaction ends: readers of a resource do not wait
// for each other, and a write waits for the reads in flight. A write locks
// the read mark's row (creating it if needed) until it ends, so a read
// that comes during a write raises its mark after the write committed, and
// then sees it. Raising the mark first, even for a read that the write
// mark then refuses, is safe: a refused read's token is at most the write
// mark, which every later write must reach anyway; it only refuses more.
//
// In the same row as the write mark, the raise would wait for every other
// reader's share lock: reads of a resource would run one after another.

// AdmitRead implements ReadFence: it admits a read's token, in a
// transaction of its own. A service that reads its data in PostgreSQL
// wants DoRead or AdmitReadTx, so that the read sees what was admitted.
func (p *Postgres) AdmitRead(ctx context.Context, resource string, token uint64, holder string) error {
	return p.DoRead(ctx, resource, token, holder, nil)
}

// DoRead runs fn in a transaction that first admits a read's token
// (AdmitReadTx): a fenced read under a read-write lock's read hold. If the
// token is stale (below the write mark) or reused, fn does not run. fn's
// error, or the commit's, is returned.
func (p *Postgres) DoRead(ctx context.Context, resource string, token uint64, holder string,
	fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := validatePostgres(resource, token); err != nil {
		return err
	}
	return p.inTx(ctx, func(tx *sql.Tx) error { return p.AdmitReadTx(ctx, tx, resource, token, holder) }, fn)
}

// AdmitReadTx admits a read's token inside the caller's transaction. It
// first raises the read mark in a statement of its own, on another of
// db's connections, which commits at once (so a pool of one connection
// cannot serve it while tx is open), and then checks the write mark in tx,
// share-locking the resource's row until tx ends: a write of the resource
// waits until then, other reads do not.
func (p *Postgres) AdmitReadTx(ctx context.Context, tx *sql.Tx, resource string, token uint64, holder string) error {
	if err := validatePostgres(resource, token); err != nil {
		return err
	}
	if _, err := p.db.ExecContext(ctx, p.raiseRead, resource, int64(token), holder); err != nil {
		return fmt.Errorf("fence: admit read %q: %w", resource, err)
	}
	var w pgMark
	err := tx.QueryRowContext(ctx, p.readShared, resource).Scan(&w.highest, &w.holder)
	if errors.Is(err, sql.ErrNoRows) {
		// Nobody wrote it: no write mark. A write that comes now finds
		// the read mark raised, and is refused below it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("fence: admit read %q: %w", resource, err)
	}
	return w.check(resource, token, holder)
}

// HighestRead returns the highest read token admitted for resource (0 if
// none).
func (p *Postgres) HighestRead(ctx context.Context, resource string) (uint64, error) {
	var highest int64
	err := p.db.QueryRowContext(ctx, `SELECT highest FROM `+readTable(p.table)+` WHERE resource = $1`, resource).Scan(&highest)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return uint64(highest), err
}
