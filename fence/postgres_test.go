package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver the tests use
	"github.com/quorumlock/redlock/fence"
	"github.com/quorumlock/redlock/fence/fencetest"
	"github.com/quorumlock/redlock/internal/pgserver"
)

// postgresDB starts a real PostgreSQL server on loopback for the test.
func postgresDB(t *testing.T) *sql.DB {
	t.Helper()
	srv, err := pgserver.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", srv.DSN)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		srv.Close()
	})
	return db
}

func newPostgres(t *testing.T, db *sql.DB, table string) *fence.Postgres {
	t.Helper()
	f, err := fence.NewPostgres(db, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestPostgres(t *testing.T) {
	db := postgresDB(t)
	i := 0
	fencetest.Run(t, func(t *testing.T) fence.Fence {
		i++
		return newPostgres(t, db, fmt.Sprint("fence_suite_", i))
	})
}

func TestPostgresRejectsBadTables(t *testing.T) {
	for _, table := range []string{"x; DROP TABLE y", "a b", "1abc", "a.b.c", `"q"`} {
		if _, err := fence.NewPostgres(nil, table); err == nil {
			t.Errorf("NewPostgres(%q) accepted", table)
		}
	}
	f, err := fence.NewPostgres(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(context.Background(), "r", 1<<63, "a"); !errors.Is(err, fence.ErrTokenRange) {
		t.Errorf("token 2^63: %v, want ErrTokenRange", err)
	}
}

// Do writes the data and the mark in one transaction: a stale holder's write
// never lands, a failing write takes its admission back with it.
func TestPostgresFencedTransactions(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	f := newPostgres(t, db, "")
	if _, err := db.ExecContext(ctx, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	setBalance := func(v int64) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO accounts VALUES ('acct', $1)
				ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance`, v)
			return err
		}
	}
	balance := func() int64 {
		var b int64
		if err := db.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = 'acct'`).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}

	if err := f.Do(ctx, "acct", 10, "a", setBalance(100)); err != nil {
		t.Fatal(err)
	}
	err := f.Do(ctx, "acct", 9, "old", setBalance(0))
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Highest != 10 {
		t.Fatalf("stale Do: %v", err)
	}
	if b := balance(); b != 100 {
		t.Fatalf("stale Do wrote: balance %d", b)
	}

	// A write that fails rolls the admission back: token 20 was never
	// admitted, so 15 still is.
	boom := errors.New("boom")
	if err := f.Do(ctx, "acct", 20, "b", func(context.Context, *sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing Do: %v", err)
	}
	if h, err := f.Highest(ctx, "acct"); err != nil || h != 10 {
		t.Fatalf("after a failed Do, Highest = %d, %v; want 10", h, err)
	}
	if err := f.Do(ctx, "acct", 15, "c", setBalance(150)); err != nil {
		t.Fatal(err)
	}

	// AdmitTx inside the caller's own transaction.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.AdmitTx(ctx, tx, "acct", 16, "d"); err != nil {
		t.Fatal(err)
	}
	if err := setBalance(160)(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if b := balance(); b != 160 {
		t.Fatalf("balance %d after AdmitTx+commit", b)
	}

	// A cancelled context: a typed error, nothing written.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.Do(cctx, "acct", 99, "e", setBalance(-1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Do: %v", err)
	}
	if h, _ := f.Highest(ctx, "acct"); h != 16 {
		t.Fatalf("cancelled Do admitted: highest %d", h)
	}
}

// A stale holder whose transaction waits behind a newer one's row lock must
// see the newer token once that commits, and write nothing.
func TestPostgresStaleWriterBlockedBehindNewerHolder(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	f := newPostgres(t, db, "")
	if _, err := db.ExecContext(ctx, `CREATE TABLE log (token bigint)`); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, "r", 1, "a"); err != nil {
		t.Fatal(err)
	}

	newerIn := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	var newerErr, staleErr error
	wg.Go(func() {
		newerErr = f.Do(ctx, "r", 3, "new", func(ctx context.Context, tx *sql.Tx) error {
			close(newerIn)
			<-release // hold the row lock while the stale writer arrives
			_, err := tx.ExecContext(ctx, `INSERT INTO log VALUES (3)`)
			return err
		})
	})
	<-newerIn
	wg.Go(func() {
		staleErr = f.Do(ctx, "r", 2, "old", func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO log VALUES (2)`)
			return err
		})
	})
	time.Sleep(100 * time.Millisecond) // let the stale writer block on the row
	close(release)
	wg.Wait()
	if newerErr != nil || !errors.Is(staleErr, fence.ErrStale) {
		t.Fatalf("newer: %v; stale: %v (want ErrStale)", newerErr, staleErr)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM log WHERE token = 2`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("stale rows written: %d, %v", n, err)
	}
}

// A table made before the read mark is brought up to date by CreateTable
// (PostgresSchema creates the read marks' table beside it): its write marks
// stay, and reads are admitted, on resources it has and on new ones.
func TestPostgresMigratesATableWithoutTheReadMark(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS legacy`); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"old_fence", "legacy.old_fence"} {
		old := `CREATE TABLE ` + table + ` (
  resource text PRIMARY KEY,
  highest  bigint NOT NULL CHECK (highest > 0),
  holder   text NOT NULL DEFAULT ''
)`
		if _, err := db.ExecContext(ctx, old); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO `+table+` VALUES ('r', 6, 'w')`); err != nil {
			t.Fatal(err)
		}
		f := newPostgres(t, db, table) // CreateTable
		if err := f.CreateTable(ctx); err != nil {
			t.Fatalf("%s: CreateTable again: %v", table, err)
		}
		if err := f.AdmitRead(ctx, "r", 7, "reader"); err != nil {
			t.Fatalf("%s: a read after the migration: %v", table, err)
		}
		if err := f.Admit(ctx, "r", 6, "w"); !errors.Is(err, fence.ErrStale) {
			t.Errorf("%s: the old writer's delayed write after a read: %v, want ErrStale", table, err)
		}
		if h, err := f.Highest(ctx, "r"); err != nil || h != 6 {
			t.Errorf("%s: the refused write moved the write mark: %d, %v, want 6", table, h, err)
		}
		if err := f.AdmitRead(ctx, "fresh", 3, "reader"); err != nil {
			t.Errorf("%s: a read of a resource nobody wrote: %v", table, err)
		}
		if h, err := f.HighestRead(ctx, "fresh"); err != nil || h != 3 {
			t.Errorf("%s: its read mark: %d, %v, want 3", table, h, err)
		}
		if err := f.Admit(ctx, "fresh", 2, "late"); !errors.Is(err, fence.ErrStale) {
			t.Errorf("%s: a first write below a read: %v, want ErrStale", table, err)
		}
		if h, err := f.Highest(ctx, "fresh"); err != nil || h != 0 {
			t.Errorf("%s: the refused first write left a write mark: %d, %v", table, h, err)
		}
	}
}

// Readers of a resource do not wait for each other, a write waits for the
// reads in flight (the share lock), and a read below a committed write is
// refused without running.
func TestPostgresReadsShareWritesWait(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	f := newPostgres(t, db, "")
	if err := f.Admit(ctx, "doc", 5, "w1"); err != nil {
		t.Fatal(err)
	}
	inRead, leave := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- f.DoRead(ctx, "doc", 7, "r1", func(ctx context.Context, tx *sql.Tx) error {
			close(inRead)
			<-leave
			return nil
		})
	}()
	<-inRead
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := f.DoRead(rctx, "doc", 8, "r2", func(context.Context, *sql.Tx) error { return nil })
	cancel()
	if err != nil {
		t.Fatalf("a second reader while the first reads: %v, want it admitted at once", err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- f.Admit(ctx, "doc", 9, "w2") }()
	select {
	case err := <-wrote:
		t.Fatalf("a write while a read is in flight: %v, want it to wait for the read", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(leave)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("the write after the reads: %v", err)
	}
	ran := false
	err = f.DoRead(ctx, "doc", 8, "r3", func(context.Context, *sql.Tx) error { ran = true; return nil })
	if !errors.Is(err, fence.ErrStale) || ran {
		t.Fatalf("a read (8) after a write (9): %v (ran %v), want ErrStale, not run", err, ran)
	}
}

// A read that comes while the first write of a resource is in flight
// (its row not yet visible) waits for that write and then sees it: the
// write holds the read mark's row. Without that lock the read would find
// no write mark, read the old data, and the write, admitted below the
// read's token, would land after it.
func TestPostgresReadDuringAFirstWriteWaitsForIt(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	f := newPostgres(t, db, "")
	if _, err := db.ExecContext(ctx, `CREATE TABLE docs (id text PRIMARY KEY, body text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	inWrite, commit := make(chan struct{}), make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		wrote <- f.Do(ctx, "new", 5, "w", func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO docs VALUES ('new', 'v5')`); err != nil {
				return err
			}
			close(inWrite)
			<-commit
			return nil
		})
	}()
	<-inWrite
	var body string
	read := make(chan error, 1)
	go func() {
		read <- f.DoRead(ctx, "new", 7, "r", func(ctx context.Context, tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, `SELECT body FROM docs WHERE id = 'new'`).Scan(&body)
		})
	}()
	select {
	case err := <-read:
		t.Fatalf("a read during the first write: %v (read %q), want it to wait for the write", err, body)
	case <-time.After(300 * time.Millisecond):
	}
	close(commit)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil || body != "v5" {
		t.Fatalf("the read after the write: %v, read %q, want v5", err, body)
	}
}

// PostgresSchema's statements, run as one string (as a migration file
// would be), create both tables.
func TestPostgresSchemaRunsAsOneString(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, fence.PostgresSchema("mig")); err != nil {
		t.Fatal(err)
	}
	f, err := fence.NewPostgres(db, "mig")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.AdmitRead(ctx, "r", 3, "a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, "r", 2, "b"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("a write below the read: %v, want ErrStale", err)
	}
}
