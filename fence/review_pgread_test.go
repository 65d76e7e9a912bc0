package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/fence"
)

// Adversarial replays of the PostgreSQL fence's read mark (postgres_read.go)
// against a real server, with the Memory fence as the reference semantics.

// AdmitRead (the plain ReadFence method) on a pool of one connection:
// DoRead begins its transaction first (taking the only connection) and then
// asks the pool for a second one for the read mark's raise. It waits for
// that connection until ctx ends: with context.Background, for ever.
//
// Found by review, fixed (the read marks are now raised in the reading
// transaction, under an advisory lock): postgres_read.go DoRead calls BeginTx before
// AdmitReadTx's p.db.ExecContext(raiseRead). N concurrent DoReads on a
// pool of N connections deadlock the same way (each holds one connection
// and waits for another).
func TestReviewPGReadPoolOfOneAdmitRead(t *testing.T) {
	db := postgresDB(t)
	f := newPostgres(t, db, "")
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := f.AdmitRead(ctx, "doc", 3, "r"); err != nil {
		t.Fatalf("AdmitRead on a pool of one connection: %v after %v, want it admitted "+
			"(DoRead holds the only connection in its tx while it waits for another for the raise)",
			err, time.Since(start).Round(time.Millisecond))
	}
	// A plain write on the same pool works (one connection suffices).
	if err := f.Admit(ctx, "doc", 4, "w"); err != nil {
		t.Fatal(err)
	}
}

// A pool of two with two reads whose transactions are open at once: each
// holds one connection and waits for another. Deterministic: the first
// read's transaction is opened by the test's own AdmitReadTx caller (as a
// service would), the second is a DoRead.
func TestReviewPGReadPoolExhaustedByOpenReadTx(t *testing.T) {
	db := postgresDB(t)
	f := newPostgres(t, db, "")
	db.SetMaxOpenConns(2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx1, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback()
	tx2, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback()
	// Two readers, each in its own transaction, on a pool of two: as many
	// open read transactions as connections.
	errs := make(chan error, 2)
	go func() { errs <- f.AdmitReadTx(ctx, tx1, "doc", 3, "r1") }()
	go func() { errs <- f.AdmitReadTx(ctx, tx2, "doc", 4, "r2") }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("two read transactions on a pool of two: %v, want both admitted (each waits for a third connection)", err)
		}
	}
}

// A writer that reads its own data in the transaction it wrote in (the
// equality rule of ReadFence: "a writer reading its own data"): AdmitTx
// locks the read mark's row until the tx ends; AdmitReadTx then raises
// the mark on another connection, which waits for that lock: the
// transaction waits for itself, and PostgreSQL cannot see the cycle (the
// waiting statement is not in the tx), so no deadlock error ever comes.
//
// Found by review, fixed: postgres_read.go AdmitReadTx raise on p.db.
func TestReviewPGReadWriterReadsOwnDataInOneTx(t *testing.T) {
	db := postgresDB(t)
	f := newPostgres(t, db, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := f.AdmitTx(ctx, tx, "doc", 7, "w"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.AdmitReadTx(ctx, tx, "doc", 7, "w"); err != nil {
		t.Fatalf("the writer's read of its own data in its tx: %v after %v (the raise waits for the tx's own lock on the read mark)",
			err, time.Since(start).Round(time.Millisecond))
	}
}

// Lock-order inversion across two resources: a reader's tx reads B then
// A, a writer's tx writes A then B. In plain PostgreSQL locking that is a
// deadlock PostgreSQL detects (40P01 after deadlock_timeout, one side
// aborted). Here the reader's wait is on a side connection (the raise), so
// the cycle reader-tx -> writer-tx -> raise-conn -> (client) -> reader-tx
// is invisible to the detector: both hang until their contexts end.
//
// Found by review, fixed (the read marks are now raised in the reading
// transaction, under an advisory lock): postgres_read.go AdmitReadTx raise on p.db.
func TestReviewPGReadCrossResourceDeadlockUndetected(t *testing.T) {
	db := postgresDB(t)
	f := newPostgres(t, db, "")
	bg := context.Background()
	for _, r := range []string{"A", "B"} {
		if err := f.Admit(bg, r, 1, "w0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(bg, 8*time.Second)
	defer cancel()
	rtx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rtx.Rollback()
	if err := f.AdmitReadTx(ctx, rtx, "B", 2, "r"); err != nil { // share lock on B's write row
		t.Fatal(err)
	}
	wtx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wtx.Rollback()
	if err := f.AdmitTx(ctx, wtx, "A", 3, "w"); err != nil { // A's write row and read row
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var werr, rerr error
	wg.Go(func() { werr = f.AdmitTx(ctx, wtx, "B", 3, "w") }) // waits for the reader's share lock
	time.Sleep(200 * time.Millisecond)
	wg.Go(func() { rerr = f.AdmitReadTx(ctx, rtx, "A", 2, "r") }) // the raise waits for the writer
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	// deadlock_timeout is 1s by default: a detected deadlock ends one side
	// within a few seconds.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		// Unblock them for cleanup, then report.
		cancel()
		<-done
		t.Fatalf("reader B->A and writer A->B: no answer after %v (writer: %v; reader: %v); want PostgreSQL's deadlock error on one side, not a hang until ctx",
			time.Since(start).Round(time.Millisecond), werr, rerr)
	}
	t.Logf("writer: %v; reader: %v", werr, rerr)
}

// A read refused for a reused token (same token as the write mark, another
// holder) still raises the read mark to that token with its holder; the
// legitimate writer's next write with its own token is then refused as
// reused. Memory (the reference) refuses the read without raising, and
// admits the writer.
//
// Found by review, fixed (the read marks are now raised in the reading
// transaction, under an advisory lock): postgres_read.go AdmitReadTx raises before
// checking; postgres.go's comment ("a refused read's token is at most the
// write mark ... it only refuses more") misses equality.
func TestReviewPGReadRefusedReusedReadPoisonsWriter(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	pg := newPostgres(t, db, "")
	for _, tc := range []struct {
		name string
		f    fence.ReadFence
	}{{"memory", new(fence.Memory)}, {"postgres", pg}} {
		if err := tc.f.Admit(ctx, "doc", 9, "w"); err != nil {
			t.Fatal(err)
		}
		if err := tc.f.AdmitRead(ctx, "doc", 9, "intruder"); !errors.Is(err, fence.ErrTokenReused) {
			t.Fatalf("%s: a read with the writer's token from another holder: %v, want ErrTokenReused", tc.name, err)
		}
		if err := tc.f.Admit(ctx, "doc", 9, "w"); err != nil {
			t.Errorf("%s: the writer's own next write after a refused read: %v, want admitted (as Memory)", tc.name, err)
		}
	}
}

// The first write of a resource does not wait for a read in flight: the
// read found no write row to share-lock, and the write locks the read
// mark's row only after the read's raise committed. The read, admitted at
// token 10, then sees the data of the write admitted at 15 in its own
// transaction (Memory: the write waits for the read's op; Postgres on a
// resource written before: the write waits for the share lock).
//
// Found by review, fixed (the read marks are now raised in the reading
// transaction, under an advisory lock): postgres_read.go AdmitReadTx returns nil on
// sql.ErrNoRows holding no lock a write must wait for.
func TestReviewPGReadFirstWriteDoesNotWaitForRead(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	f := newPostgres(t, db, "")
	if _, err := db.ExecContext(ctx, `CREATE TABLE rdocs (id text PRIMARY KEY, body text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	inRead, leave := make(chan struct{}), make(chan struct{})
	var first, second string
	read := make(chan error, 1)
	go func() {
		read <- f.DoRead(ctx, "fresh", 10, "r", func(ctx context.Context, tx *sql.Tx) error {
			err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT body FROM rdocs WHERE id = 'fresh'), '')`).Scan(&first)
			if err != nil {
				return err
			}
			close(inRead)
			<-leave
			return tx.QueryRowContext(ctx, `SELECT coalesce((SELECT body FROM rdocs WHERE id = 'fresh'), '')`).Scan(&second)
		})
	}()
	<-inRead
	wrote := make(chan error, 1)
	go func() {
		wrote <- f.Do(ctx, "fresh", 15, "w", func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO rdocs VALUES ('fresh', 'v15')`)
			return err
		})
	}()
	waited := true
	select {
	case err := <-wrote:
		waited = false
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(300 * time.Millisecond):
	}
	close(leave)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if waited {
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
	}
	if !waited || first != second {
		t.Fatalf("the first write of a resource ran during a read in flight (waited %v): the read admitted at 10 saw %q then %q (data of the write at 15)",
			waited, first, second)
	}
}

// Readers and writers on one resource, concurrently, with random tokens:
// no error but ErrStale / ErrTokenReused (no deadlock error, no hang), and
// no write is admitted below a read mark committed before it began.
func TestReviewPGReadConcurrentNoDeadlock(t *testing.T) {
	db := postgresDB(t)
	f := newPostgres(t, db, "")
	db.SetMaxOpenConns(32)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `CREATE TABLE wlog (token bigint, readmark bigint)`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var token uint64 = 1
	next := func() uint64 { mu.Lock(); defer mu.Unlock(); token++; return token }
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	deadline := time.Now().Add(3 * time.Second)
	for g := range 8 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				tok := next()
				var err error
				if g%2 == 0 {
					err = f.DoRead(ctx, "x", tok, "h", func(context.Context, *sql.Tx) error { return nil })
				} else {
					err = f.Do(ctx, "x", tok, "h", func(ctx context.Context, tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, `INSERT INTO wlog SELECT $1, coalesce((SELECT highest FROM fence_tokens_read WHERE resource = 'x'), 0)`, int64(tok))
						return err
					})
				}
				if err != nil && !errors.Is(err, fence.ErrStale) && !errors.Is(err, fence.ErrTokenReused) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent reads and writes: %v", err)
	}
	var bad int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM wlog WHERE token < readmark`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("writes admitted below the read mark they saw: %d, %v", bad, err)
	}
}

// An existing deployment whose fence table was created by a migration
// (PostgresSchema run once, before the read mark) and that never calls
// CreateTable: after upgrading, every write fails, since AdmitTx now
// locks a row in "<table>_read", which does not exist. No read could have
// been admitted without that table, so its read mark is 0 for every
// resource: refusing the writes is not needed for safety.
//
// Found by review, fixed: postgres.go AdmitTx's lockRead on a
// table that migrations never created; docs/operations.md says
// "upgrading needs no other migration".
func TestReviewPGReadUpgradeWithoutCreateTableKeepsWrites(t *testing.T) {
	db := postgresDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE mig_fence (
  resource text PRIMARY KEY,
  highest  bigint NOT NULL CHECK (highest > 0),
  holder   text NOT NULL DEFAULT ''
)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO mig_fence VALUES ('r', 6, 'w')`); err != nil {
		t.Fatal(err)
	}
	f, err := fence.NewPostgres(db, "mig_fence") // no CreateTable: the schema came from a migration
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Admit(ctx, "r", 7, "w2"); err != nil {
		t.Errorf("a write after upgrading, on the table the old migration made: %v, want admitted", err)
	}
	if err := f.Admit(ctx, "r", 5, "old"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("a stale write: %v, want ErrStale", err)
	}
}
