package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/mysql"
)

// One instance runs the job; the others skip it.
func ExampleNew() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("MYSQL_DSN")) // user:password@tcp(host:3306)/db?interpolateParams=true
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	locker, err := mysql.New(ctx, db, &sqllock.Options{Table: "locks"})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // before the database handle

	lease, err := locker.TryLock(ctx, "nightly-report", time.Minute)
	if errors.Is(err, distlock.ErrLocked) {
		fmt.Println("another instance runs the report")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Unlock(ctx, lease)
	fmt.Println("running the report with fence", lease.Fence)
}

// The table for a migration; then New with sqllock.Options{SkipCreateTable: true}.
func ExampleDDL() {
	ddl, err := mysql.DDL("")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS `distlock_leases` (
	// 	key_hash BINARY(32) NOT NULL PRIMARY KEY,
	// 	lock_key MEDIUMBLOB NOT NULL,
	// 	token VARBINARY(255) NOT NULL,
	// 	fence BIGINT NOT NULL,
	// 	expires_at DATETIME(6) NOT NULL,
	// 	owner VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL
	// ) ENGINE=InnoDB;
	// INSERT INTO `distlock_leases` (key_hash, lock_key, token, fence, expires_at, owner)
	// VALUES (X'0000000000000000000000000000000000000000000000000000000000000000', '', '', 0, '1970-01-01 00:00:00', 'distlock: fence high-water mark')
	// ON DUPLICATE KEY UPDATE key_hash = key_hash;
}
