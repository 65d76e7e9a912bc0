package redlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver of the example

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/fence"
	"github.com/quorumlock/redlock/internal/pgserver"
	"github.com/quorumlock/redlock/node"
)

// A leader guards its writes to PostgreSQL with its term: the admission
// and the write commit in one transaction, so a deposed leader that wakes
// up after a newer one wrote (the overrun client-go's leaderelection does
// not guard against) changes nothing.
func ExampleLeadership_Term() {
	c, stop := familyClient()
	defer stop()
	srv, err := pgserver.Start(context.Background()) // in production: your own database
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	db, err := sql.Open("pgx", srv.DSN)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	store, _ := fence.NewPostgres(db, "")
	if err := store.CreateTable(ctx); err != nil { // or fence.PostgresSchema("") in a migration
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schedule (job text PRIMARY KEY, node text)`); err != nil {
		panic(err)
	}
	assign := func(ld *redlock.Leadership, node string) error {
		return store.Do(ctx, "schedule", ld.Term(), ld.ID(), func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO schedule VALUES ('backup', $1)
				ON CONFLICT (job) DO UPDATE SET node = EXCLUDED.node`, node)
			return err
		})
	}

	e, _ := c.Election("scheduler")
	a, _ := e.Campaign(ctx, "host-a")
	fmt.Println("host-a leads:", assign(a, "node-1"))
	// host-a stalls (a GC pause, a SIGSTOP) and its leadership ends; here
	// it resigns, which ends it the same way for the store.
	_ = a.Resign(ctx)
	b, _ := e.Campaign(ctx, "host-b")
	defer b.Resign(ctx)
	fmt.Println("host-b leads:", assign(b, "node-2"), "newer term:", b.Term() > a.Term())
	// host-a wakes up and writes with the term it had.
	fmt.Println("host-a refused:", errors.Is(assign(a, "node-3"), fence.ErrStale))
	var assigned string
	_ = db.QueryRowContext(ctx, `SELECT node FROM schedule WHERE job = 'backup'`).Scan(&assigned)
	fmt.Println("backup runs on", assigned)
	// Output:
	// host-a leads: <nil>
	// host-b leads: <nil> newer term: true
	// host-a refused: true
	// backup runs on node-2
}

// The same guard over the service's own Redis: fence.Redis admits the
// term and writes in one script.
func ExampleLeadership_Term_redis() {
	c, stop := familyClient()
	defer stop()
	n, err := node.StartProcess(context.Background(), node.Config{Name: "store"}) // the service's Redis
	if err != nil {
		panic(err)
	}
	defer n.Close()
	rdb := n.NewClient()
	defer rdb.Close()
	ctx := context.Background()
	store := fence.NewRedis(rdb, "fence")
	assign := func(ld *redlock.Leadership, node string) error {
		return store.Set(ctx, "schedule", ld.Term(), ld.ID(), "{schedule}:backup", node, 0)
	}

	e, _ := c.Election("scheduler")
	a, _ := e.Campaign(ctx, "host-a")
	fmt.Println("host-a leads:", assign(a, "node-1"))
	_ = a.Resign(ctx) // host-a's leadership ends while it stalls
	b, _ := e.Campaign(ctx, "host-b")
	defer b.Resign(ctx)
	fmt.Println("host-b leads:", assign(b, "node-2"))
	err = assign(a, "node-3") // host-a wakes up with the term it had
	var stale *fence.StaleTokenError
	fmt.Println("host-a refused:", errors.As(err, &stale) && stale.Token == a.Term() && stale.Highest == b.Term())
	fmt.Println("backup runs on", rdb.Get(ctx, "{schedule}:backup").Val())
	// Output:
	// host-a leads: <nil>
	// host-b leads: <nil>
	// host-a refused: true
	// backup runs on node-2
}
