package main

import (
	"context"
	"database/sql"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/mysql"
	"github.com/distlock/distlock/sqllock/postgres"
)

// openPostgres opens a PostgreSQL connection URL (see pgPool).
func openPostgres(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	pool, err := pgPool(ctx, u)
	if err != nil {
		return nil, err
	}
	l, err := postgres.New(ctx, pool, &sqllock.Options{Owner: o.owner})
	if err != nil {
		pool.Close()
		return nil, redactErr("postgres "+hostsOf(u), err, u)
	}
	return &backend{locker: l, close: closeLocker(l.Close, pool.Close)}, nil
}

// pgPool returns a pool of at most 4 connections for a PostgreSQL connection URL
// (postgres:// or postgresql://), with pgx's parameters (sslmode, sslrootcert,
// connect_timeout, ...). It connects lazily.
func pgPool(ctx context.Context, u *backendURL) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(u.raw)
	if err != nil {
		return nil, badURL(u, "%s", newRedactor(u).text(err.Error()))
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, redactErr("postgres", err, u)
	}
	return pool, nil
}

// openMySQL opens a mysql:// URL (see mysqlDB).
func openMySQL(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	db, addr, err := mysqlDB(u)
	if err != nil {
		return nil, err
	}
	l, err := mysql.New(ctx, db, &sqllock.Options{Owner: o.owner})
	if err != nil {
		db.Close()
		return nil, redactErr("mysql "+addr, err, u)
	}
	return &backend{locker: l, close: closeLocker(l.Close, func() { db.Close() })}, nil
}

// mysqlDB returns the database of mysql://user:password@host[:port]/db[?param=value...],
// where the parameters are go-sql-driver/mysql's DSN parameters (tls=true, ...),
// and the server's address. It connects lazily.
func mysqlDB(u *backendURL) (*sql.DB, string, error) {
	if len(u.hosts) != 1 {
		return nil, "", badURL(u, "want exactly one host")
	}
	addr, err := withPort(u.hosts[0], "3306")
	if err != nil {
		return nil, "", badURL(u, "%v", err)
	}
	db := strings.TrimPrefix(u.path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, "", badURL(u, "want a database name as the path: mysql://user:password@host:port/db")
	}
	cfg := mysqldriver.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", addr, db
	cfg.Timeout = 10 * time.Second
	if u.user != nil {
		cfg.User = u.user.Username()
		cfg.Passwd, _ = u.user.Password()
	}
	dsn := cfg.FormatDSN()
	if len(u.query) > 0 {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + u.query.Encode()
	}
	// The DSN holds the password: its errors are reported without it.
	red := newRedactor(u)
	if cfg, err = mysqldriver.ParseDSN(dsn); err != nil {
		return nil, "", badURL(u, "%s", red.text(err.Error()))
	}
	conn, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, "", badURL(u, "%s", red.text(err.Error()))
	}
	return sql.OpenDB(conn), addr, nil
}

func hostsOf(u *backendURL) string { return strings.Join(u.hosts, ",") }
