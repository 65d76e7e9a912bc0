package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync/atomic"
)

// Postgres is a Fence kept in the protected service's own PostgreSQL
// database: one high-water-mark row per resource, raised in the same
// transaction as the write it guards. It works through database/sql with
// any PostgreSQL driver (pgx's stdlib, lib/pq); it imports none itself.
//
// The row of a resource is locked from admission until the transaction
// ends, so fenced transactions on one resource run one after another, and a
// stale one that waited behind a newer holder sees the newer token and is
// rejected. Transactions on different resources do not wait for each other.
//
// It is a ReadFence: a second table, "<table>_read", keeps the read marks
// (postgres_read.go), and writes are admitted only at or above them. A
// write and the reads of one resource exclude each other for their
// transactions by an advisory lock on the resource (exclusive for a write,
// shared for reads), so reads of a resource run side by side, and a write
// waits for the reads in flight and they for it.
type Postgres struct {
	db    *sql.DB
	table string

	upsert, read, lockWrite, lockRead, readMarks, raiseRead, readTable string
	hasReads                                                           atomic.Bool // the read marks' table exists
}

var _ ReadFence = (*Postgres)(nil)

// DefaultPostgresTable is the table NewPostgres uses when given "".
const DefaultPostgresTable = "fence_tokens"

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// NewPostgres returns a fence stored in table ("" for DefaultPostgresTable;
// "schema.table" works). Create the table with CreateTable, or put
// PostgresSchema(table) in your migrations.
func NewPostgres(db *sql.DB, table string) (*Postgres, error) {
	if table == "" {
		table = DefaultPostgresTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("fence: %q is not a plain [schema.]table name", table)
	}
	return &Postgres{
		db:    db,
		table: table,
		// The WHERE clause raises the mark only for a higher token, or fills
		// in a holder that was unknown. When it is false the row is still
		// locked (ON CONFLICT DO UPDATE locks the conflicting row either
		// way), so the read that follows sees what the decision is made on.
		upsert: `INSERT INTO ` + table + ` AS f (resource, highest, holder) VALUES ($1, $2, $3)
ON CONFLICT (resource) DO UPDATE SET highest = EXCLUDED.highest, holder = EXCLUDED.holder
WHERE f.highest < EXCLUDED.highest OR (f.highest = EXCLUDED.highest AND f.holder = '')
RETURNING highest`,
		read: `SELECT highest, holder FROM ` + table + ` WHERE resource = $1`,
		// The resource's advisory lock, in the two-key space (apart from
		// the one-key locks an application may take), keyed by the table
		// and the resource: exclusive for a write, shared for a read, until
		// the transaction ends. Hash collisions only make some resources
		// wait for each other.
		lockWrite: `SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`,
		lockRead:  `SELECT pg_advisory_xact_lock_shared(hashtext($1), hashtext($2))`,
		// The read marks a write must reach: those at or above its token.
		// Those below are dropped, as the write mark now refuses them all.
		readMarks: `WITH gone AS (DELETE FROM ` + readTable(table) + ` WHERE resource = $1 AND highest < $2)
SELECT highest, holder FROM ` + readTable(table) + ` WHERE resource = $1 AND highest >= $2`,
		// A reader's mark: one row per resource and holder, so that
		// readers with other holders never wait for each other's rows.
		raiseRead: `INSERT INTO ` + readTable(table) + ` AS r (resource, holder, highest) VALUES ($1, $3, $2)
ON CONFLICT (resource, holder) DO UPDATE SET highest = GREATEST(r.highest, EXCLUDED.highest)`,
		readTable: readTable(table),
	}, nil
}

// PostgresSchema is the DDL of the fence's tables, two statements: the
// write marks, and the read marks in "<table>_read" (ReadFence). Each
// creates its table if it does not exist, so running them again is
// harmless, and they bring a fence table created before the read mark up
// to date.
func PostgresSchema(table string) string { return strings.Join(postgresDDL(table), ";\n") }

func postgresDDL(table string) []string {
	if table == "" {
		table = DefaultPostgresTable
	}
	return []string{`CREATE TABLE IF NOT EXISTS ` + table + ` (
  resource text PRIMARY KEY,
  highest  bigint NOT NULL CHECK (highest > 0),
  holder   text NOT NULL DEFAULT ''
)`, `CREATE TABLE IF NOT EXISTS ` + readTable(table) + ` (
  resource text NOT NULL,
  holder   text NOT NULL DEFAULT '',
  highest  bigint NOT NULL CHECK (highest > 0),
  PRIMARY KEY (resource, holder)
)`}
}

// readTable is the table of the read marks of the fence table table.
func readTable(table string) string { return table + "_read" }

// CreateTable creates the fence's tables if they do not exist
// (PostgresSchema).
func (p *Postgres) CreateTable(ctx context.Context) error {
	for _, ddl := range postgresDDL(p.table) {
		if _, err := p.db.ExecContext(ctx, ddl); err != nil {
			return err
		}
	}
	return nil
}

// Admit implements Fence: it admits the token in a transaction of its own.
// A service that writes its data in PostgreSQL wants Do or AdmitTx instead,
// so that the admission and the write commit together.
func (p *Postgres) Admit(ctx context.Context, resource string, token uint64, holder string) error {
	return p.Do(ctx, resource, token, holder, nil)
}

// Do runs fn in a transaction that first admits the token. If the token is
// stale or reused, fn does not run and nothing is written. If fn returns an
// error, the transaction rolls back (the admission too) and Do returns that
// error; otherwise Do commits and returns the commit's error.
//
// fn must do all its work through tx. Do does not retry serialization
// failures: at the default READ COMMITTED isolation the admission itself
// never causes one.
func (p *Postgres) Do(ctx context.Context, resource string, token uint64, holder string,
	fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := validatePostgres(resource, token); err != nil {
		return err
	}
	return p.inTx(ctx, func(tx *sql.Tx) error { return p.AdmitTx(ctx, tx, resource, token, holder) }, fn)
}

// inTx runs admit and then fn (if not nil) in one transaction, and
// commits if both succeed; otherwise it rolls back and returns the error.
func (p *Postgres) inTx(ctx context.Context, admit func(tx *sql.Tx) error, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // err says why; a failed rollback adds nothing
		}
	}()
	if err := admit(tx); err != nil {
		return err
	}
	if fn != nil {
		if err := fn(ctx, tx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// AdmitTx admits the token inside the caller's transaction, and holds the
// resource's write lock (its advisory lock, exclusive, and its row) until
// it ends. On a stale or reused token the caller must roll back: the
// transaction has written nothing of the fence's, but may hold the caller's
// earlier writes.
func (p *Postgres) AdmitTx(ctx context.Context, tx *sql.Tx, resource string, token uint64, holder string) error {
	if err := validatePostgres(resource, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, p.lockWrite, p.table, resource); err != nil {
		return fmt.Errorf("fence: admit %q: %w", resource, err)
	}
	var raised int64
	err := tx.QueryRowContext(ctx, p.upsert, resource, int64(token), holder).Scan(&raised)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("fence: admit %q: %w", resource, err)
	}
	if errors.Is(err, sql.ErrNoRows) {
		var w pgMark
		if err := tx.QueryRowContext(ctx, p.read, resource).Scan(&w.highest, &w.holder); err != nil {
			return fmt.Errorf("fence: admit %q: %w", resource, err)
		}
		if err := w.check(resource, token, holder); err != nil {
			return err
		}
		// The same token again, from its holder or an unknown one.
	}
	return p.checkReads(ctx, tx, resource, token, holder)
}

// checkReads refuses a write below a read mark of resource, or equal to
// one from another holder (both known), and drops the marks below it.
func (p *Postgres) checkReads(ctx context.Context, tx *sql.Tx, resource string, token uint64, holder string) error {
	if ok, err := p.readsExist(ctx, tx); !ok {
		return err // a table from before the read mark, not yet created: no read admitted
	}
	rows, err := tx.QueryContext(ctx, p.readMarks, resource, int64(token))
	if err != nil {
		return fmt.Errorf("fence: admit %q: %w", resource, err)
	}
	defer rows.Close()
	var highest pgMark // the highest read mark, and whether another holder read at the token
	reused := ""
	for rows.Next() {
		var r pgMark
		if err := rows.Scan(&r.highest, &r.holder); err != nil {
			return fmt.Errorf("fence: admit %q: %w", resource, err)
		}
		highest.highest = max(highest.highest, r.highest)
		if r.highest == int64(token) && holder != "" && r.holder != "" && r.holder != holder {
			reused = r.holder
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fence: admit %q: %w", resource, err)
	}
	if highest.highest > int64(token) {
		return &StaleTokenError{Resource: resource, Token: token, Highest: uint64(highest.highest)}
	}
	if reused != "" {
		return &ReusedTokenError{Resource: resource, Token: token, Holder: holder, StoredHolder: reused}
	}
	return nil
}

// readsExist reports whether the read marks' table exists (cached once it
// does): a deployment that put the schema before the read mark in its
// migrations, and does not run CreateTable, has none until it migrates,
// and then no read can have been admitted.
func (p *Postgres) readsExist(ctx context.Context, tx *sql.Tx) (bool, error) {
	if p.hasReads.Load() {
		return true, nil
	}
	var ok bool
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, p.readTable).Scan(&ok); err != nil {
		return false, fmt.Errorf("fence: read marks' table: %w", err)
	}
	if ok {
		p.hasReads.Store(true)
	}
	return ok, nil
}

// pgMark is a mark as a row stores it.
type pgMark struct {
	highest int64
	holder  string
}

// check refuses a token below the mark, or equal to it from another
// holder (both known), as Memory's marks do.
func (m pgMark) check(resource string, token uint64, holder string) error {
	switch {
	case int64(token) < m.highest:
		return &StaleTokenError{Resource: resource, Token: token, Highest: uint64(m.highest)}
	case int64(token) == m.highest && holder != "" && m.holder != "" && holder != m.holder:
		return &ReusedTokenError{Resource: resource, Token: token, Holder: holder, StoredHolder: m.holder}
	}
	return nil
}

// Highest returns the highest token admitted for resource (0 if none).
func (p *Postgres) Highest(ctx context.Context, resource string) (uint64, error) {
	var highest int64
	err := p.db.QueryRowContext(ctx, `SELECT highest FROM `+p.table+` WHERE resource = $1`, resource).Scan(&highest)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return uint64(highest), err
}

func validatePostgres(resource string, token uint64) error {
	if err := validate(resource, token); err != nil {
		return err
	}
	if token > math.MaxInt64 {
		return fmt.Errorf("%w: %d does not fit in a bigint", ErrTokenRange, token)
	}
	return nil
}
