package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The read marks of the Postgres fence (ReadFence), in "<table>_read": one
// row per resource and reader holder, the highest read token admitted for
// it. A read takes the resource's advisory lock shared, checks the write
// mark, and raises its holder's mark, all in the reading transaction: the
// mark commits with the read, and a refused read raises nothing. A write
// takes the lock exclusive, so it waits for the reads in flight (and they
// for it), then refuses a token below any read mark, and drops the marks
// below its own. Everything happens on the caller's connection, so
// PostgreSQL sees every wait (its deadlock detector included) and a pool of
// one connection serves it.

// AdmitRead implements ReadFence: it admits a read's token, in a
// transaction of its own. A service that reads its data in PostgreSQL
// wants DoRead or AdmitReadTx, so that the read sees what was admitted.
func (p *Postgres) AdmitRead(ctx context.Context, resource string, token uint64, holder string) error {
	return p.DoRead(ctx, resource, token, holder, nil)
}

// DoRead runs fn in a transaction that first admits a read's token
// (AdmitReadTx): a fenced read under a read-write lock's read hold. If the
// token is stale (below the write mark) or reused, fn does not run. If fn
// fails, the transaction rolls back, the read mark with it. fn's error, or
// the commit's, is returned.
func (p *Postgres) DoRead(ctx context.Context, resource string, token uint64, holder string,
	fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := validatePostgres(resource, token); err != nil {
		return err
	}
	return p.inTx(ctx, func(tx *sql.Tx) error { return p.AdmitReadTx(ctx, tx, resource, token, holder) }, fn)
}

// AdmitReadTx admits a read's token inside the caller's transaction: it
// takes the resource's advisory lock shared until tx ends (a write of the
// resource waits until then; other reads do not), checks the write mark,
// and raises holder's read mark in tx. The mark is the transaction's: it
// counts once tx commits, and a rollback takes it back, so commit a read
// whose result you act on. Readers with the same holder ("" included)
// share a row, and wait for each other's transactions.
func (p *Postgres) AdmitReadTx(ctx context.Context, tx *sql.Tx, resource string, token uint64, holder string) error {
	if err := validatePostgres(resource, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, p.lockRead, p.table, resource); err != nil {
		return fmt.Errorf("fence: admit read %q: %w", resource, err)
	}
	var w pgMark
	err := tx.QueryRowContext(ctx, p.read, resource).Scan(&w.highest, &w.holder)
	if err != nil && !errors.Is(err, sql.ErrNoRows) { // no row: nobody wrote it
		return fmt.Errorf("fence: admit read %q: %w", resource, err)
	}
	if err := w.check(resource, token, holder); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, p.raiseRead, resource, int64(token), holder); err != nil {
		return fmt.Errorf("fence: admit read %q: %w", resource, err)
	}
	return nil
}

// HighestRead returns the highest read token admitted for resource (0 if
// none).
func (p *Postgres) HighestRead(ctx context.Context, resource string) (uint64, error) {
	var highest int64
	err := p.db.QueryRowContext(ctx, `SELECT COALESCE(max(highest), 0) FROM `+p.readTable+` WHERE resource = $1`, resource).Scan(&highest)
	return uint64(highest), err
}
