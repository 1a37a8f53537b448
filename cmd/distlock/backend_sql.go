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

// openPostgres opens a PostgreSQL connection URL (postgres:// or postgresql://),
// with pgx's parameters (sslmode, connect_timeout, ...).
func openPostgres(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	cfg, err := pgxpool.ParseConfig(u.raw)
	if err != nil {
		return nil, badURL(u, "%s", scrub(err.Error(), u))
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, scrubErr("postgres", err, u)
	}
	l, err := postgres.New(ctx, pool, &sqllock.Options{Owner: o.owner})
	if err != nil {
		pool.Close()
		return nil, scrubErr("postgres "+hostsOf(u), err, u)
	}
	return &backend{locker: l, close: closeLocker(l.Close, pool.Close)}, nil
}

// openMySQL opens mysql://user:password@host[:port]/db[?param=value...], where the
// parameters are go-sql-driver/mysql's DSN parameters.
func openMySQL(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	if len(u.hosts) != 1 {
		return nil, badURL(u, "want exactly one host")
	}
	addr, err := withPort(u.hosts[0], "3306")
	if err != nil {
		return nil, badURL(u, "%v", err)
	}
	db := strings.TrimPrefix(u.path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, badURL(u, "want a database name as the path: mysql://user:password@host:port/db")
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
	if cfg, err = mysqldriver.ParseDSN(dsn); err != nil {
		return nil, badURL(u, "%s", scrub(err.Error(), u))
	}
	conn, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, badURL(u, "%s", scrub(err.Error(), u))
	}
	sqlDB := sql.OpenDB(conn)
	l, err := mysql.New(ctx, sqlDB, &sqllock.Options{Owner: o.owner})
	if err != nil {
		sqlDB.Close()
		return nil, scrubErr("mysql "+addr, err, u)
	}
	return &backend{locker: l, close: closeLocker(l.Close, func() { sqlDB.Close() })}, nil
}

func hostsOf(u *backendURL) string { return strings.Join(u.hosts, ",") }
