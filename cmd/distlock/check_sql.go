package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/distlock/distlock/sqllock"
)

// checkPostgres reads the PostgreSQL settings that decide whether a commit that
// took or renewed a lock survives a crash or a failover.
func checkPostgres(ctx context.Context, u *backendURL) (*checkReport, error) {
	pool, err := pgPool(ctx, u)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var (
		version, fsync, syncCommit, fullPages, standbys string
		recovery                                        bool
		replicas, syncReplicas                          int
	)
	err = pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes'),
		current_setting('synchronous_standby_names'), pg_is_in_recovery(),
		(SELECT count(*) FROM pg_stat_replication),
		(SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))`).
		Scan(&version, &fsync, &syncCommit, &fullPages, &standbys, &recovery, &replicas, &syncReplicas)
	if err != nil {
		return nil, redactErr("postgres "+hostsOf(u), err, u)
	}
	r := &checkReport{}
	role := "primary"
	if recovery {
		role = "standby (in recovery)"
	}
	r.server("%s: PostgreSQL %s, %s, %d replica(s) streaming (%d synchronous)", hostsOf(u), version, role, replicas, syncReplicas)
	if recovery {
		r.add(sevUnsafe, "pg_is_in_recovery()", "true", "this is a read-only standby: every lock attempt fails, and a lock is only as current as the replication; point distlock at the primary")
	}
	judge := func(setting, value, bad, msg string) {
		if value == bad {
			r.add(sevUnsafe, setting, value, "%s", msg)
		} else {
			r.ok(setting, value)
		}
	}
	judge("fsync", fsync, "off", "a crash of the machine can lose or corrupt committed rows: a lock just taken or renewed (two holders) and fence increments (fences repeat); set fsync = on")
	judge("full_page_writes", fullPages, "off", "a crash of the machine can leave torn pages that recovery cannot repair; set full_page_writes = on")
	judge("synchronous_commit", syncCommit, "off", "a crash of the server loses the last commits it acknowledged (up to 3 x wal_writer_delay): a lock just taken or renewed (two holders) and fence increments (fences repeat); set synchronous_commit = on")
	switch {
	case replicas > 0 && (syncReplicas == 0 || standbys == ""):
		r.add(sevUnsafe, "replication", "asynchronous", "a failover to a standby that had not received the latest commits loses locks just taken (two holders) and steps fences back; list the standbys in synchronous_standby_names, or pass fences to the resource")
	case replicas > 0 && (syncCommit == "local" || syncCommit == "off"):
		r.add(sevUnsafe, "replication", "synchronous_commit="+syncCommit, "commits do not wait for the synchronous standbys: a failover can lose locks just taken; set synchronous_commit = on or remote_apply")
	case replicas > 0:
		r.ok("replication", "synchronous")
	}
	return r, nil
}

// checkMySQL reads the MySQL or MariaDB settings that decide whether a commit that
// took or renewed a lock survives a crash.
func checkMySQL(ctx context.Context, u *backendURL) (*checkReport, error) {
	db, addr, err := mysqlDB(u)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var version, flush, syncBinlog, logBin, readOnly, doublewrite string
	err = db.QueryRowContext(ctx, `SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin,
		@@read_only, @@innodb_doublewrite`).Scan(&version, &flush, &syncBinlog, &logBin, &readOnly, &doublewrite)
	if err != nil {
		return nil, redactErr("mysql "+addr, err, u)
	}
	r := &checkReport{}
	r.server("%s: %s %s", addr, mysqlFlavor(version), version)
	if flush != "1" {
		r.add(sevUnsafe, "innodb_flush_log_at_trx_commit", flush, "a crash of the machine (2) or of the server (0) loses up to about a second of commits: a lock just taken or renewed (two holders) and fence increments (fences repeat); set innodb_flush_log_at_trx_commit = 1")
	} else {
		r.ok("innodb_flush_log_at_trx_commit", flush)
	}
	if isOff(doublewrite) {
		r.add(sevUnsafe, "innodb_doublewrite", doublewrite, "a crash of the machine can leave torn pages that recovery cannot repair; set innodb_doublewrite = ON")
	} else {
		r.ok("innodb_doublewrite", doublewrite)
	}
	if !isOff(readOnly) {
		r.add(sevUnsafe, "read_only", readOnly, "the server is read-only (a replica?): every lock attempt fails; point distlock at the primary")
	}
	if !isOff(logBin) && syncBinlog != "1" {
		r.add(sevNote, "sync_binlog", syncBinlog, "after a crash the binary log can miss commits the tables kept: replicas may lack locks and fence increments, which matters after a failover; set sync_binlog = 1")
	}
	var engine string
	err = db.QueryRowContext(ctx, `SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, sqllock.DefaultTable).Scan(&engine)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		r.add(sevNote, "table", sqllock.DefaultTable, "does not exist yet: distlock run creates it (InnoDB)")
	case err != nil:
		r.add(sevUnchecked, "table", sqllock.DefaultTable, "its engine could not be read: %s", oneLine(err))
	case !strings.EqualFold(engine, "InnoDB"):
		r.add(sevUnsafe, "table "+sqllock.DefaultTable+" engine", engine, "not transactional or not crash-safe: locks and fences can be lost; ALTER TABLE %s ENGINE = InnoDB", sqllock.DefaultTable)
	default:
		r.ok("table "+sqllock.DefaultTable+" engine", engine)
	}
	return r, nil
}

// mysqlFlavor names the server from its version string.
func mysqlFlavor(version string) string {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "MariaDB"
	}
	return "MySQL"
}

// isOff reports whether a MySQL boolean setting is off.
func isOff(v string) bool {
	switch strings.ToUpper(v) {
	case "0", "OFF", "FALSE", "":
		return true
	}
	return false
}

// checkSQLiteURL checks the SQLite file of a sqlite: URL.
func checkSQLiteURL(ctx context.Context, u *backendURL) (*checkReport, error) {
	path, err := sqlitePath(u)
	if err != nil {
		return nil, err
	}
	return checkSQLite(ctx, path)
}

// checkSQLite reads the SQLite file at path, read-only (it creates nothing).
func checkSQLite(ctx context.Context, path string) (*checkReport, error) {
	r := &checkReport{}
	r.add(sevNote, "scope", "one host", "an SQLite file excludes the processes of one host only (and not over a network file system)")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		r.server("%s: no such file yet (distlock run creates it)", path)
		return r, nil
	}
	db, err := openSQLiteReadOnly(path)
	if err != nil {
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	defer db.Close()
	var version, journal string
	var synchronous int
	if err := db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&version); err != nil {
		return nil, fmt.Errorf("SQLite database %s: %w", path, err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
		return nil, fmt.Errorf("SQLite database %s: %w", path, err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&synchronous); err != nil {
		return nil, fmt.Errorf("SQLite database %s: %w", path, err)
	}
	r.server("%s: SQLite %s", path, version)
	r.ok("journal_mode", journal)
	if synchronous == 0 {
		r.add(sevUnsafe, "synchronous", "OFF", "a crash of the machine can lose or corrupt the database")
	} else {
		r.ok("synchronous", [...]string{"OFF", "NORMAL", "FULL", "EXTRA"}[min(synchronous, 3)])
	}
	return r, nil
}
