package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/sqllock/internal/sqltest"
	"github.com/stretchr/testify/require"
)

// The SQLite tests re-run the test binary as child processes that share a database
// file with the parent. childEnv selects the child's mode; the others pass its
// arguments.
const (
	childEnv     = "SQLLOCK_TEST_CHILD"
	childDBEnv   = "SQLLOCK_TEST_DB"
	childKeyEnv  = "SQLLOCK_TEST_KEY"
	childDirEnv  = "SQLLOCK_TEST_DIR"
	childIterEnv = "SQLLOCK_TEST_ITERATIONS"
	childTTL     = 3 * time.Second
	childTable   = "processes"
)

// runChild runs the child mode named by childEnv and returns the exit code. It
// prints its results on stdout, one per line.
func runChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sql.Open("sqlite", dsn(os.Getenv(childDBEnv)))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer db.Close()
	l, err := New(ctx, db, &sqllock.Options{Table: childTable, Owner: "child-" + strconv.Itoa(os.Getpid())})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer l.Close()
	key := os.Getenv(childKeyEnv)
	switch mode := os.Getenv(childEnv); mode {
	case "trylock":
		// One attempt; on success the lease is left to expire (as if this process
		// had crashed while holding it).
		lease, err := l.TryLock(ctx, key, childTTL)
		switch {
		case err == nil:
			fmt.Println("ok", lease.Fence)
		case errors.Is(err, distlock.ErrLocked):
			fmt.Println("locked")
		default:
			fmt.Println("error", err)
		}
		return 0
	case "loop":
		n, _ := strconv.Atoi(os.Getenv(childIterEnv))
		if err := criticalLoop(ctx, l, key, os.Getenv(childDirEnv), n); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("done")
		return 0
	default:
		fmt.Println("error unknown mode", mode)
		return 1
	}
}

// criticalLoop acquires key n times (polling TryLock with a short jittered pause)
// and, while holding it, enters a critical section in dir: it creates the marker
// file exclusively (which fails if another process is inside), appends its fence to
// the log, and removes the marker before it unlocks.
func criticalLoop(ctx context.Context, l *Locker, key, dir string, n int) error {
	marker := filepath.Join(dir, "inside")
	for range n {
		var lease distlock.Lease
		for {
			var err error
			lease, err = l.TryLock(ctx, key, 10*time.Second)
			if err == nil {
				break
			}
			if !errors.Is(err, distlock.ErrLocked) {
				return err
			}
			time.Sleep(time.Duration(1+rand.IntN(4)) * time.Millisecond) // polling pace
		}
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("mutual exclusion broken: entering with fence %d: %w", lease.Fence, err)
		}
		f.Close()
		logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(logf, "%d %d\n", os.Getpid(), lease.Fence)
		logf.Close()
		if err != nil {
			return err
		}
		if err := os.Remove(marker); err != nil {
			return err
		}
		if err := l.Unlock(ctx, lease); err != nil {
			return err
		}
	}
	return nil
}

// child starts the test binary in child mode with the given environment.
func child(t *testing.T, mode, path, key string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childDBEnv+"="+path, childKeyEnv+"="+key)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func childOutput(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %v: %v; output:\n%s", cmd.Env[len(cmd.Env)-1], err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestSQLiteProcesses: two OS processes on one database file exclude each other.
func TestProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	l, _ := newClient(t, path, &sqllock.Options{Table: childTable})
	key := "process-" + driver.NewToken()

	la, err := l.TryLock(sqltest.OpCtx(t), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := childOutput(t, child(t, "trylock", path, key)); got != "locked" {
		t.Fatalf("another process's TryLock of a key this process holds: %q, want locked", got)
	}
	if err := l.Unlock(sqltest.OpCtx(t), la); err != nil {
		t.Fatal(err)
	}
	got := childOutput(t, child(t, "trylock", path, key))
	if got != fmt.Sprintf("ok %d", la.Fence+1) {
		t.Fatalf("another process's TryLock of a released key: %q, want ok %d", got, la.Fence+1)
	}
	// The child exited holding the key for childTTL: it stays locked until then.
	if _, err := l.TryLock(sqltest.OpCtx(t), key, time.Minute); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a key another process holds: %v, want ErrLocked", err)
	}
	var lb distlock.Lease
	require.Eventually(t, func() bool {
		lb, err = l.TryLock(sqltest.OpCtx(t), key, time.Minute)
		return err == nil
	}, childTTL+5*time.Second, 20*time.Millisecond, "the key of an exited process is still locked after its ttl")
	if lb.Fence != la.Fence+2 {
		t.Fatalf("Fence %d after the other process's lease, want %d", lb.Fence, la.Fence+2)
	}
	if err := l.Unlock(sqltest.OpCtx(t), lb); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteProcessesContend: three processes take turns in a critical section
// guarded by one key; none ever enters while another is inside, and the fences
// they log in turn order strictly increase.
func TestProcessesContend(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shared.db")
	newClient(t, path, &sqllock.Options{Table: childTable}) // creates the table and WAL mode
	key := "contend-" + driver.NewToken()
	const procs, iterations = 3, 15
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmds[i] = child(t, "loop", path, key, childDirEnv+"="+dir, childIterEnv+"="+strconv.Itoa(iterations))
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil || strings.TrimSpace(outs[i].String()) != "done" {
			t.Errorf("child %d: %v; output:\n%s", i, err, outs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	logb, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	lines, pids := 0, map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(logb))
	for sc.Scan() {
		var pid string
		var fence uint64
		if _, err := fmt.Sscan(sc.Text(), &pid, &fence); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if fence <= last {
			t.Fatalf("log line %d: fence %d after %d: fences must strictly increase in turn order", lines+1, fence, last)
		}
		last = fence
		pids[pid] = true
		lines++
	}
	if lines != procs*iterations || len(pids) != procs {
		t.Fatalf("%d turns by %d processes, want %d by %d", lines, len(pids), procs*iterations, procs)
	}
}
