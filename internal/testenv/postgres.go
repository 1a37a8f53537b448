package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvPostgresURL is a PostgreSQL connection URL
// (postgres://user:password@host:port/db?sslmode=disable) of a server that testenv
// does not start, for Env.Postgres.
const EnvPostgresURL = "DISTLOCK_POSTGRES_URL"

// postgresInitTimeout bounds initdb.
const postgresInitTimeout = 2 * time.Minute

// A PostgresServer is a PostgreSQL server and the URL to connect to it.
type PostgresServer struct {
	*Server
	// URL connects as the superuser postgres (trust authentication on loopback) to
	// the database postgres: postgres://postgres@127.0.0.1:port/postgres?sslmode=disable.
	// For an External server it is the value of DISTLOCK_POSTGRES_URL.
	URL string
}

// Postgres returns a new PostgreSQL server on a free loopback port: a cluster made
// by initdb in its own directory, run by postgres (which refuses to run as root; when
// the tests run as root, initdb and postgres run as the user postgres). It listens
// only on 127.0.0.1 (and a Unix socket in its directory) and trusts every local
// connection. It runs with fsync off: data survives Kill and Restart (the kernel
// keeps what postgres wrote), not a crash of the machine. Stop and Restart use a
// fast shutdown (SIGINT), which disconnects clients. Each call starts another
// server. It is ready when a pgx connection answers with its data directory.
//
// If DISTLOCK_POSTGRES_URL is set, Postgres instead returns an External server at
// that URL, after checking that it answers SELECT 1.
func (e *Env) Postgres() (*PostgresServer, error) {
	if u := os.Getenv(EnvPostgresURL); u != "" {
		return e.externalPostgres(u)
	}
	pgBin, err := LookBin("postgres", "/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin")
	if err != nil {
		return nil, err
	}
	// initdb of the same installation as postgres.
	initdb := filepath.Join(filepath.Dir(pgBin), "initdb")
	if _, err := os.Stat(initdb); err != nil {
		if initdb, err = LookBin("initdb", "/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin"); err != nil {
			return nil, err
		}
	}
	runAs := ""
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("testenv: PostgreSQL refuses to run as root and there is no user postgres (%v); the Debian package postgresql creates it: %w", err, ErrNotInstalled)
		}
		runAs = "postgres"
	}
	dir, err := e.tempDir("postgres")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	realData := data
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		realData = filepath.Join(real, "data")
	}
	s, err := e.StartProcess(ProcessSpec{
		Name: "postgres",
		Bin:  pgBin,
		Args: []string{
			"-D", data,
			"-p", "{port}",
			"-k", "{dir}",
			"-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off",
			"-c", "full_page_writes=off",
			"-c", "shared_buffers=32MB",
			"-c", "max_connections=300",
			"-c", "log_min_messages=warning",
		},
		Dir:  dir,
		User: runAs,
		Prepare: func(s *Server) error {
			if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
				return nil // initialised by an earlier start
			}
			if err := os.RemoveAll(data); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), postgresInitTimeout)
			defer cancel()
			_, err := RunCommand(ctx, runAs, dir, initdb,
				"-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C",
				"--no-sync", "--no-instructions")
			return err
		},
		Ready: func(ctx context.Context, addr string) error {
			var got string
			err := postgresQuery(ctx, postgresURL(addr), "SHOW data_directory", &got)
			if err != nil {
				return err
			}
			if got != data && got != realData {
				return fmt.Errorf("the PostgreSQL at %s is not ours: data_directory = %s, want %s", addr, got, data)
			}
			return nil
		},
		StopSignal: syscall.SIGINT, // fast shutdown: SIGTERM would wait for clients to leave
	})
	if err != nil {
		return nil, err
	}
	return &PostgresServer{Server: s, URL: postgresURL(s.Addr())}, nil
}

func postgresURL(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
}

// externalPostgres returns the External server of DISTLOCK_POSTGRES_URL once it
// answers SELECT 1.
func (e *Env) externalPostgres(u string) (*PostgresServer, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", EnvPostgresURL, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var one int
	if err := postgresQuery(ctx, u, "SELECT 1", &one); err != nil {
		return nil, fmt.Errorf("testenv: %s=%s: PostgreSQL does not answer SELECT 1: %w", EnvPostgresURL, u, err)
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	return &PostgresServer{Server: e.ExternalServer("postgres", addr), URL: u}, nil
}

// postgresQuery connects to url, scans the one row of query into dest and
// disconnects.
func postgresQuery(ctx context.Context, url, query string, dest ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	err = conn.QueryRow(ctx, query).Scan(dest...)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	return errors.Join(err, conn.Close(cctx))
}
