package main

import (
	"context"
	"strings"
)

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
