package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/sqlite" // registers modernc's driver "sqlite"
)

// sqliteBusyTimeout is how long, in milliseconds, a statement waits for another
// process's write lock on the file.
const sqliteBusyTimeout = 10000

// openSQLite opens sqlite:///absolute/path or sqlite:relative/path.
func openSQLite(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	path, err := sqlitePath(u)
	if err != nil {
		return nil, err
	}
	return openSQLiteFile(ctx, path, o)
}

// sqlitePath returns the file that a sqlite: URL names.
func sqlitePath(u *backendURL) (string, error) {
	path := u.opaque
	if u.hier {
		if len(u.hosts) > 0 && !(len(u.hosts) == 1 && u.hosts[0] == "localhost") {
			return "", badURL(u, "want sqlite:///absolute/path.db or sqlite:relative/path.db (three slashes before an absolute path)")
		}
		path = u.path
	}
	if err := u.noQuery(); err != nil {
		return "", err
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return "", badURL(u, "no database file")
	}
	return path, nil
}

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
