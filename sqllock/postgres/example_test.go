package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
)

// distlock.Lock waits for a release through LISTEN/NOTIFY.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locker, err := postgres.New(ctx, pool, nil) // table distlock_leases
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // before the pool

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lease, err := distlock.Lock(wctx, locker, "migrations", time.Minute, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Unlock(ctx, lease)
	// Pass lease.Fence to the resource you change, so that it can reject a
	// holder that paused past lease.Expires.
	fmt.Println("migrating with fence", lease.Fence)
}

// The table for a migration; then New with sqllock.Options{SkipCreateTable: true}.
func ExampleDDL() {
	ddl, err := postgres.DDL("")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS "distlock_leases" (
	// 	key_hash bytea PRIMARY KEY,
	// 	lock_key bytea NOT NULL,
	// 	token bytea NOT NULL,
	// 	fence bigint NOT NULL,
	// 	expires_at timestamptz NOT NULL,
	// 	owner text NOT NULL
	// );
	// INSERT INTO "distlock_leases" (key_hash, lock_key, token, fence, expires_at, owner)
	// VALUES (decode('0000000000000000000000000000000000000000000000000000000000000000', 'hex'), '', '', 0, 'epoch', 'distlock: fence high-water mark')
	// ON CONFLICT (key_hash) DO NOTHING;
}
