// Command distlock runs a command under a distributed lock — a flock(1) whose lock
// lives in Redis, ZooKeeper, etcd, an SQL database or a local SQLite file — and
// reports who holds a lock.
//
//	distlock run [flags] KEY [flags] -- CMD [ARGS...]
//	distlock status [--backend URL] KEY
//	distlock check [--backend URL]
//	distlock --version
//
// run acquires KEY, starts CMD, renews the lease while CMD runs (every ttl/3),
// and releases KEY when CMD exits. CMD's environment has DISTLOCK_KEY and
// DISTLOCK_FENCE, the lease's fencing token: strictly greater than that of every
// earlier run under KEY, so a script can hand it to the resource it writes to and
// let the resource reject writes from a stale holder. SIGINT, SIGTERM and SIGHUP
// sent to distlock are forwarded to CMD. If the lease is lost while CMD runs (the
// backend was unreachable for longer than the ttl, say) distlock sends CMD SIGTERM,
// then SIGKILL after --kill-after, and exits with status 124.
//
// The exit status says whether CMD ran inside the lease, decided from the clocks:
// distlock passes on CMD's status only when it saw CMD exit before the lease ended
// (its Expires passed, or the backend reported it lost). When distlock could not
// watch meanwhile (it was stopped, by SIGSTOP or a debugger, or starved of CPU), it
// knows only that CMD exited between the last moment it saw CMD running and the
// moment it saw the exit; if the lease ended in between, it exits 124 as well,
// because CMD may have run without the lease. That is the safe answer for a
// caller: CMD's status would claim an exclusive run that may not have been one,
// while 124 at worst makes the caller check CMD's work before running it again.
// So 124 means "CMD may have run without the lease", not "CMD did not run": it may
// have done all or part of its work, and a caller must not simply run it again
// (let the resource check DISTLOCK_FENCE).
//
// With no --backend and no DISTLOCK_BACKEND, the lock lives in an SQLite file in the
// user's cache directory (distlock/locks.db), which excludes every invocation on
// this host: `distlock run job -- echo hi` works with no server.
//
// Exit status of run:
//
//	CMD's status  CMD ran under the lock and exited before the lease ended (128+N
//	              if signal N killed it)
//	75            KEY is held by another owner and --wait was not given, or its
//	              timeout passed (EX_TEMPFAIL); CMD did not run
//	124           the lease ended before distlock saw CMD exit: CMD was stopped,
//	              or exited while distlock was paused; CMD may have run without
//	              the lease (see above)
//	125           distlock failed: the backend is unreachable or returned an error,
//	              or the lease ended before CMD could start; CMD did not run
//	126           CMD could not be executed
//	127           CMD was not found
//	128+N         distlock got signal N while waiting for KEY; CMD did not run
//	2             bad usage: a flag, the backend URL, KEY
//
// Exit status of status: 0 KEY is held (the holder is printed), 3 KEY is free,
// 2 bad usage, 125 the backend failed.
//
// check connects to the backend and reports the server settings that matter for
// lock safety (eviction and persistence on Redis, durability and replication on
// PostgreSQL and MySQL, members and versions on etcd and ZooKeeper). Exit status
// of check: 0 nothing unsafe found, 1 a setting can lose or free a held lock or
// repeat a fence, 125 the backend could not be checked (unreachable, or a setting
// could not be read), 2 bad usage.
//
// Run "distlock help" for the flags and the backend URLs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses. See the package documentation.
const (
	exitOK       = 0
	exitUsage    = 2
	exitFree     = 3   // status: the key is free
	exitHeld     = 75  // run: the key is held (EX_TEMPFAIL)
	exitLost     = 124 // run: the lease ended before distlock saw CMD exit
	exitFailed   = 125 // distlock itself failed
	exitNoExec   = 126 // CMD could not be executed
	exitNotFound = 127 // CMD was not found
)

const usageText = `usage:
  distlock run [flags] KEY [flags] -- CMD [ARGS...]
  distlock status [--backend URL] KEY
  distlock check [--backend URL]
  distlock help | --version

run acquires KEY, runs CMD while it renews the lease, and releases KEY when CMD
exits. CMD's environment has DISTLOCK_KEY and DISTLOCK_FENCE (the lease's fencing
token, greater than that of every earlier run under KEY). SIGINT, SIGTERM and SIGHUP
are forwarded to CMD. If the lease is lost while CMD runs, distlock sends CMD SIGTERM,
then SIGKILL after --kill-after, and exits 124. It exits with CMD's status only when
it saw CMD exit before the lease ended: if distlock was paused (SIGSTOP, starved of
CPU) while CMD exited and the lease ended, it cannot tell which came first, and
exits 124. So 124 means CMD may have run without the lease, and may have done its
work: check the work before running CMD again.

Flags go before or after KEY; CMD starts after --, or, without --, at the first
argument after KEY that is not a flag. Durations have a unit: 500ms, 30s, 5m, 1h.

run flags:
  --backend URL      where the lock lives (default $DISTLOCK_BACKEND, else an SQLite
                     file in the user cache directory: one lock table per host)
  --ttl D            lease time to live, renewed every D/3 (default 30s)
  -w, --wait [D]     wait for KEY instead of exiting 75 when it is held, and wait
                     through a backend outage; with D (--wait 5m or --wait=5m),
                     exit 75 if KEY is still held after D (125 if the backend
                     still does not answer)
  --min-hold D       keep KEY at least D after acquiring it, even if CMD ends
                     sooner, so that a job fired a little late elsewhere does not
                     run again (default 0)
  --kill-after D     after the lease is lost: SIGTERM to CMD, SIGKILL D later
                     (default 10s)
  --owner LABEL      owner label that status shows (default host:pid)
  -v, --verbose      log acquisition, renewals and release to stderr

status prints KEY's holder, fence, remaining ttl and owner. check reports the
server settings that can free a held lock or repeat a fence.

backend URLs (a password in a URL is never printed; prefer $DISTLOCK_BACKEND to
--backend for one, as other users can read a command line):
  redis://[[user]:password@]host[:port][/db]     one Redis server (rediss:// for TLS)
  redis-sentinel://[[user]:password@]s1[:26379],s2,.../MASTER[/db]
                                                 the master that Redis Sentinel names;
                                                 ?sentinel_username=U&sentinel_password=P
                                                 if the sentinels ask for a password
  redlock://[[user]:password@]h1:p1,h2:p2,h3:p3[/db][?max_ttl=D]
                                                 RedLock over independent Redis masters;
                                                 max_ttl (default: the larger of --ttl
                                                 and 1m) bounds every ttl, and must be
                                                 the same on every client of the masters
  zk://h1:p1,h2:p2[/root]                        ZooKeeper ensemble (root /distlock);
                                                 --ttl is the session timeout asked for
                                                 (the server grants 4s to 40s by
                                                 default); the lease ttl is capped at
                                                 5/12 of the granted timeout
  etcd://[user:password@]h1:p1,h2:p2[/prefix]    etcd v3 cluster
  postgres://user:password@host:port/db?sslmode=disable
                                                 PostgreSQL (postgresql:// too; pgx's
                                                 parameters: sslmode, sslrootcert, ...)
  mysql://user:password@host:port/db             MySQL 8 or MariaDB (go-sql-driver/mysql's
                                                 parameters: tls=true, ...)
  sqlite:///absolute/path.db, sqlite:relative/path.db
                                                 SQLite file: processes of one host

TLS on redis, rediss, redis-sentinel, redlock, etcd and zk URLs (any of these
turns TLS on): ?tls=true, ca_file=PATH (PEM CAs; default the system's),
cert_file=PATH&key_file=PATH (client certificate), server_name=NAME,
insecure_skip_verify=true.

exit status of run:
  CMD's status  CMD ran under the lock (128+N if signal N killed it)
  75            KEY is held (no --wait, or its timeout passed); CMD did not run
  124           the lease ended before distlock saw CMD exit: CMD was stopped, or
                it exited while distlock was paused; it may have run without the lease
  125           distlock failed (backend unreachable or failing, or the lease ended
                before CMD could start); CMD did not run
  126, 127      CMD could not be executed, was not found
  128+N         distlock got signal N while waiting for KEY
  2             bad usage (flags, backend URL, KEY)
exit status of status: 0 held, 3 free, 2 bad usage, 125 backend failure.
exit status of check: 0 nothing unsafe found, 1 unsafe setting, 125 could not
check (unreachable, or a setting could not be read), 2 bad usage.
`

func main() {
	quietClientLogs()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}

// run is the whole command: it takes the arguments after the program name and the
// environment as parameters, and returns the exit status, so that tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "distlock: missing command (run, status or check); see distlock help")
		return exitUsage
	}
	ctx := context.Background()
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdin, stdout, stderr, env)
	case "status":
		return cmdStatus(ctx, args[1:], stdout, stderr, env)
	case "check":
		return cmdCheck(ctx, args[1:], stdout, stderr, env)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
		return exitOK
	case "version", "--version", "-version":
		fmt.Fprint(stdout, versionText())
		return exitOK
	default:
		fmt.Fprintf(stderr, "distlock: unknown command %q (want run, status or check); see distlock help\n", args[0])
		return exitUsage
	}
}

// lookupEnv returns the value of name in env; when env assigns name more than once,
// the last assignment wins, as it does for exec.Cmd.Env.
func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// withEnv returns env without any assignment of the names in set, plus set's
// assignments, in order.
func withEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, s := range set {
			if sk, _, _ := strings.Cut(s, "="); sk == k {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// oneLine flattens an error message to one line (errors.Join puts each error on a
// line of its own).
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// A usageError is the user's: a bad flag, URL or key. It exits 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// isUsage reports whether err is (or wraps) a usageError.
func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}
