package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvMySQLDSN is a go-sql-driver/mysql DSN (user:password@tcp(host:port)/db) of a
// MySQL or MariaDB server that testenv does not start, for Env.MariaDB.
const EnvMySQLDSN = "DISTLOCK_MYSQL_DSN"

// MariaDBDatabase is the database that a MariaDB started by testenv creates.
const MariaDBDatabase = "distlock"

// mariadbInitTimeout bounds mariadb-install-db.
const mariadbInitTimeout = 2 * time.Minute

// A MariaDBServer is a MariaDB server and the DSN to connect to it.
type MariaDBServer struct {
	*Server
	// DSN connects (go-sql-driver/mysql) as root, without a password, to the
	// database distlock: root@tcp(127.0.0.1:port)/distlock. For an External server
	// it is the value of DISTLOCK_MYSQL_DSN.
	DSN string
}

// MariaDB returns a new MariaDB server on a free loopback port, with its data
// directory made by mariadb-install-db in its own directory (as the user mysql when
// the tests run as root). It listens only on 127.0.0.1 (and a Unix socket in its
// directory), reads no option files (--no-defaults), and creates the database
// distlock at every start. root@127.0.0.1 has no password. InnoDB writes its log at
// every commit and flushes it each second, so data survives Kill and Restart (the
// kernel keeps what mariadbd wrote), not a crash of the machine. Each call starts
// another server. It is ready when go-sql-driver/mysql connects to it and finds its
// data directory.
//
// If DISTLOCK_MYSQL_DSN is set, MariaDB instead returns an External server at that
// DSN (MySQL 8 or MariaDB), after checking that it answers a ping.
func (e *Env) MariaDB() (*MariaDBServer, error) {
	if dsn := os.Getenv(EnvMySQLDSN); dsn != "" {
		return e.externalMySQL(dsn)
	}
	server, err := LookBin("mariadbd", "/usr/sbin", "/usr/libexec")
	if err != nil {
		var err2 error
		if server, err2 = LookBin("mysqld", "/usr/sbin", "/usr/libexec"); err2 != nil {
			return nil, err
		}
	}
	install, err := LookBin("mariadb-install-db", "/usr/bin", "/usr/sbin")
	if err != nil {
		var err2 error
		if install, err2 = LookBin("mysql_install_db", "/usr/bin", "/usr/sbin"); err2 != nil {
			return nil, err
		}
	}
	runAs := ""
	var userArgs []string
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("mysql"); err == nil {
			runAs = "mysql"
		} else {
			userArgs = []string{"--user=root"} // mariadbd runs as root only when told to
		}
	}
	dir, err := e.tempDir("mariadb")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	realData := data
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		realData = filepath.Join(real, "data")
	}
	initFile := filepath.Join(dir, "init.sql")
	// Options of both the bootstrap and the server.
	common := []string{
		"--datadir=" + data,
		"--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=16M",
		"--innodb-use-native-aio=0",
		"--skip-log-bin",
		"--skip-name-resolve",
	}
	args := append([]string{"--no-defaults"}, common...)
	args = append(args, userArgs...)
	args = append(args,
		"--port={port}",
		"--bind-address=127.0.0.1",
		"--socket={dir}/mysqld.sock",
		"--pid-file={dir}/mysqld.pid",
		"--tmpdir={dir}",
		"--init-file="+initFile,
		"--innodb-flush-log-at-trx-commit=2",
		"--max-connections=500",
		"--performance-schema=OFF",
	)
	s, err := e.StartProcess(ProcessSpec{
		Name: "mariadb",
		Bin:  server,
		Args: args,
		Dir:  dir,
		User: runAs,
		Prepare: func(s *Server) error {
			if err := os.WriteFile(initFile, []byte("CREATE DATABASE IF NOT EXISTS "+MariaDBDatabase+";\n"), 0o644); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(data, "mysql")); err == nil {
				return nil // installed by an earlier start
			}
			if err := os.RemoveAll(data); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), mariadbInitTimeout)
			defer cancel()
			iargs := append([]string{"--no-defaults"}, common...)
			iargs = append(iargs, userArgs...)
			iargs = append(iargs, "--auth-root-authentication-method=normal", "--skip-test-db")
			_, err := RunCommand(ctx, runAs, dir, install, iargs...)
			return err
		},
		Ready: func(ctx context.Context, addr string) error {
			var got string
			if err := mysqlQuery(ctx, mariadbDSN(addr), "SELECT @@datadir", &got); err != nil {
				return err
			}
			got = strings.TrimSuffix(got, "/")
			if got != data && got != realData {
				return fmt.Errorf("the MariaDB at %s is not ours: datadir = %s, want %s", addr, got, data)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	return &MariaDBServer{Server: s, DSN: mariadbDSN(s.Addr())}, nil
}

func mariadbDSN(addr string) string {
	return "root@tcp(" + addr + ")/" + MariaDBDatabase
}

// externalMySQL returns the External server of DISTLOCK_MYSQL_DSN once it answers.
func (e *Env) externalMySQL(dsn string) (*MariaDBServer, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", EnvMySQLDSN, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var one int
	if err := mysqlQuery(ctx, dsn, "SELECT 1", &one); err != nil {
		return nil, fmt.Errorf("testenv: %s=%s: the server does not answer: %w", EnvMySQLDSN, dsn, err)
	}
	return &MariaDBServer{Server: e.ExternalServer("mysql", cfg.Addr), DSN: dsn}, nil
}

// mysqlQuery opens dsn, scans the one row of query into dest and closes it.
func mysqlQuery(ctx context.Context, dsn, query string, dest ...any) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	err = db.QueryRowContext(ctx, query).Scan(dest...)
	return errors.Join(err, db.Close())
}
