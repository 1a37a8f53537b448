//go:build (darwin && (amd64 || arm64)) || (freebsd && (386 || amd64 || arm || arm64)) || (illumos && amd64) || (linux && (386 || amd64 || arm || arm64 || loong64 || ppc64le || riscv64 || s390x)) || (netbsd && amd64) || (openbsd && (amd64 || arm64)) || (windows && (386 || amd64 || arm64))

// The platforms above are those that modernc.org/sqlite (v1.62) has a port for;
// backend_nosqlite.go is the same condition negated. Elsewhere distlock builds
// without SQLite.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/sqlite" // registers modernc's driver "sqlite"
)

// sqliteBusyTimeout is how long, in milliseconds, a statement waits for another
// process's write lock on the file.
const sqliteBusyTimeout = 10000

// openSQLiteFile opens (creating it if missing) the SQLite database file path.
func openSQLiteFile(ctx context.Context, path string, o openOptions) (*backend, error) {
	if strings.ContainsAny(path, "?#") || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, usagef("SQLite database file %q: want a plain file path, without '?' or '#'", path)
	}
	db, err := sql.Open("sqlite", fmt.Sprintf("%s?_pragma=busy_timeout(%d)", path, sqliteBusyTimeout))
	if err != nil {
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	l, err := sqlite.New(ctx, db, &sqllock.Options{Owner: o.owner})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("SQLite database %s: %w", path, err)
	}
	return &backend{locker: l, close: closeLocker(l.Close, func() { db.Close() })}, nil
}

// openSQLiteReadOnly opens the SQLite file at path read-only: it fails, and
// creates nothing, when the file does not exist.
func openSQLiteReadOnly(path string) (*sql.DB, error) {
	dsn := (&url.URL{Scheme: "file", Path: path, RawQuery: fmt.Sprintf("mode=ro&_pragma=busy_timeout(%d)", sqliteBusyTimeout)}).String()
	return sql.Open("sqlite", dsn)
}
