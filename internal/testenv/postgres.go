package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
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
//
// PostgreSQL's backends (one process per connection) run in sessions of their own
// (setsid), out of reach of the signals that Server sends to its process group; so
// PostgresServer's Pause, Resume, Kill, Restart and Stop also signal every process
// that the postmaster forked.
type PostgresServer struct {
	*Server
	// URL connects as the superuser postgres (trust authentication on loopback) to
	// the database postgres: postgres://postgres@127.0.0.1:port/postgres?sslmode=disable.
	// For an External server it is the value of DISTLOCK_POSTGRES_URL.
	URL string

	mu     sync.Mutex
	paused []int // the postmaster's descendants that Pause stopped
}

// Pause stops the postmaster (Server.Pause) and every process it forked, and returns
// once they are all stopped. Resume (or, if the test does not, a t.Cleanup) continues
// them.
func (s *PostgresServer) Pause(t testing.TB) {
	t.Helper()
	s.Server.Pause(t) // the postmaster first, so that it forks no more backends
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.paused) > 0 {
		return
	}
	pids := descendants(s.Pid())
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
			s.paused = append(s.paused, pid)
		}
	}
	t.Cleanup(func() {
		if err := s.resumeBackends(); err != nil {
			t.Errorf("testenv: resume %s after the test: %v", s, err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range s.paused {
		for !processStopped(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("testenv: pause %s: backend %d still running 10s after SIGSTOP", s, pid)
			}
			time.Sleep(time.Millisecond) // polling /proc; bounded by the deadline
		}
	}
}

// Resume continues the backends that Pause stopped, then the postmaster.
func (s *PostgresServer) Resume(t testing.TB) {
	t.Helper()
	if err := s.resumeBackends(); err != nil {
		t.Fatalf("testenv: resume %s: %v", s, err)
	}
	s.Server.Resume(t)
}

func (s *PostgresServer) resumeBackends() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, pid := range s.paused {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("SIGCONT %d: %w", pid, err))
		}
	}
	s.paused = nil
	return errors.Join(errs...)
}

// Kill kills the postmaster and every process it forked with SIGKILL, as a crash of
// the machine's PostgreSQL would, and returns once the postmaster has exited.
// Restart starts it again on the same data (crash recovery).
func (s *PostgresServer) Kill(t testing.TB) {
	t.Helper()
	if s.External() {
		s.Server.Kill(t) // fails the test
		return
	}
	if err := s.resumeBackends(); err != nil {
		t.Fatalf("testenv: kill %s: %v", s, err)
	}
	if pid := s.Pid(); pid > 0 {
		// Stop the postmaster so that it forks nothing while its children die; once
		// it is dead they could no longer be found (they are reparented).
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		for _, c := range descendants(pid) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	}
	s.Server.Kill(t)
}

// Restart resumes the backends if paused, then restarts the server (fast shutdown,
// then start on the same port and data).
func (s *PostgresServer) Restart(t testing.TB) {
	t.Helper()
	if err := s.resumeBackends(); err != nil {
		t.Fatalf("testenv: restart %s: %v", s, err)
	}
	s.Server.Restart(t)
}

// Stop resumes the backends if paused, then stops the server (fast shutdown).
func (s *PostgresServer) Stop() error {
	return errors.Join(s.resumeBackends(), s.Server.Stop())
}

// descendants returns the processes below pid (children, grandchildren, ...), read
// from /proc.
func descendants(pid int) []int {
	if pid <= 0 {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// parentOf reads the parent pid of pid from /proc/pid/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}

// processStopped reports whether every thread of pid is stopped, or pid is gone.
func processStopped(pid int) bool {
	state, _, ok := procStat("/proc/" + strconv.Itoa(pid) + "/stat")
	return !ok || state == 'T' || state == 't' || state == 'Z' || state == 'X'
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
