package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/quorumlock/redlock/fence"
	"github.com/quorumlock/redlock/internal/pgserver"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// exampleStore starts a real redis-server standing for the protected
// service's own Redis, and returns a client for it.
func exampleStore() (*redis.Client, func()) {
	n, err := node.StartProcess(context.Background(), node.Config{Name: "store"})
	if err != nil {
		panic(err)
	}
	rdb := n.NewClient()
	return rdb, func() {
		rdb.Close()
		n.Close()
	}
}

// A service fences the writes to its own Redis: each lock holder sends
// its token (l.Token()) and, optionally, a name for itself. A holder that
// was paused past its lease comes back with an older token and is turned
// away without writing.
func ExampleRedis_Set() {
	rdb, stop := exampleStore()
	defer stop()
	ctx := context.Background()

	fmt.Println(setStatus(ctx, rdb, 2307, "billing-worker-2", "paid")) // the current holder
	// An older holder, paused past its lease, wakes up and writes.
	fmt.Println(setStatus(ctx, rdb, 1283, "billing-worker-1", "void"))
	fmt.Println("status:", rdb.Get(ctx, "{invoice:7}:status").Val())
	// Output:
	// <nil>
	// invoice 7 has a newer holder, nothing was written: fence: stale fencing token for "invoice:7": got 1283, already admitted 2307
	// status: paid
}

// setStatus is the README's fence snippet (fence/readme_test.go keeps
// them equal).
func setStatus(ctx context.Context, rdb redis.UniversalClient, token uint64, holder, status string) error {
	// In the service that owns the data. token is the lock holder's l.Token(), sent with its request;
	// holder is a name the holder gives itself, optional: "" for none. The lock has no name for its
	// holder; with names, the same token from two holders is refused (fence.ErrTokenReused).
	store := fence.NewRedis(rdb, "fence")
	err := store.Set(ctx, "invoice:7", token, holder, "{invoice:7}:status", status, 0)
	if errors.Is(err, fence.ErrStale) {
		return fmt.Errorf("invoice 7 has a newer holder, nothing was written: %w", err)
	}
	return err
}

// A read-modify-write fences its read too: Get admits the token and
// reads in one step, so a newer holder's read cannot fall between this
// holder's read and its write.
func ExampleRedis_Get() {
	rdb, stop := exampleStore()
	defer stop()
	ctx := context.Background()
	store := fence.NewRedis(rdb, "")

	v, err := store.Get(ctx, "counter", 512, "", "{counter}:value")
	fmt.Printf("%q %v\n", v, err)
	_ = store.Set(ctx, "counter", 512, "", "{counter}:value", "1", 0)
	v, err = store.Get(ctx, "counter", 512, "", "{counter}:value")
	fmt.Printf("%q %v\n", v, err)
	// Output:
	// "" redis: nil
	// "1" <nil>
}

// Within one process, Memory.Do runs the operation while no other
// operation on the resource can be admitted.
func ExampleMemory_Do() {
	var store fence.Memory // the zero value is ready
	ctx := context.Background()
	balance := 0
	deposit := func(token uint64, amount int) error {
		return store.Do(ctx, "account:9", token, "", func() error {
			balance += amount
			return nil
		})
	}
	fmt.Println(deposit(1024, 10))
	fmt.Println(deposit(1024, 5)) // the same holder again: admitted
	err := deposit(770, 100)      // an older holder
	var stale *fence.StaleTokenError
	fmt.Println(errors.As(err, &stale), stale.Token, stale.Highest)
	fmt.Println("balance:", balance, "highest:", store.Highest("account:9"))
	// Output:
	// <nil>
	// <nil>
	// true 770 1024
	// balance: 15 highest: 1024
}

// In PostgreSQL the admission and the write commit in one transaction:
// a stale token rolls back the whole of it.
func ExamplePostgres_Do() {
	srv, err := pgserver.Start(context.Background()) // in production: your own database
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	db, err := sql.Open("pgx", srv.DSN) // any database/sql driver for PostgreSQL
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()

	store, err := fence.NewPostgres(db, "") // table fence_tokens
	if err != nil {
		panic(err)
	}
	if err := store.CreateTable(ctx); err != nil { // or fence.PostgresSchema("") in a migration
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE invoices (id int PRIMARY KEY, status text)`); err != nil {
		panic(err)
	}
	write := func(token uint64, status string) error {
		return store.Do(ctx, "invoice:7", token, "", func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO invoices VALUES (7, $1)
				ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status`, status)
			return err
		})
	}
	fmt.Println(write(2307, "paid"))
	fmt.Println(errors.Is(write(1283, "void"), fence.ErrStale))
	var status string
	_ = db.QueryRowContext(ctx, `SELECT status FROM invoices WHERE id = 7`).Scan(&status)
	fmt.Println("status:", status)
	// Output:
	// <nil>
	// true
	// status: paid
}

// Over HTTP the client sends the token in the Fencing-Token header; a
// stale one gets 409 and never reaches the handler.
func ExampleMiddleware() {
	var store fence.Memory
	h := fence.Middleware(&store, func(r *http.Request) string { return r.URL.Path },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "written") }))
	send := func(token string) {
		req := httptest.NewRequest(http.MethodPut, "/orders/42", nil)
		req.Header.Set(fence.TokenHeader, token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	send("2307")
	send("1283")
	// Output:
	// 200 written
	// 409 {"code":"stale","error":"stale fencing token","resource":"/orders/42","token":1283,"highest":2307}
}
