//go:build !((darwin && (amd64 || arm64)) || (freebsd && (386 || amd64 || arm || arm64)) || (illumos && amd64) || (linux && (386 || amd64 || arm || arm64 || loong64 || ppc64le || riscv64 || s390x)) || (netbsd && amd64) || (openbsd && (amd64 || arm64)) || (windows && (386 || amd64 || arm64)))

package main

import (
	"context"
	"database/sql"
	"runtime"
)

// This build has no SQLite backend: modernc.org/sqlite has no port for this
// platform (see backend_sqlite.go). errNoSQLite says so.
func errNoSQLite(path string) error {
	return usagef("SQLite database %s: this distlock (%s/%s) has no SQLite backend (modernc.org/sqlite has no port for it); use --backend with a server (redis://, postgres://, ...)", path, runtime.GOOS, runtime.GOARCH)
}

func openSQLiteFile(ctx context.Context, path string, o openOptions) (*backend, error) {
	return nil, errNoSQLite(path)
}

func openSQLiteReadOnly(path string) (*sql.DB, error) {
	return nil, errNoSQLite(path)
}
