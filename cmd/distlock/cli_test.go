package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fenceOf runs CMD under key and returns the DISTLOCK_FENCE it saw.
func fenceOf(t *testing.T, env []string, backend, key string) uint64 {
	t.Helper()
	code, out, errOut := runDL(t, env, "run", "--backend", backend, key, "--", "sh", "-c", `echo "$DISTLOCK_KEY $DISTLOCK_FENCE"`)
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, errOut)
	}
	line := strings.TrimSpace(out)
	i := strings.LastIndex(line, " ")
	if i < 0 || line[:i] != key {
		t.Fatalf("CMD printed %q, want %q and a fence", out, key)
	}
	fence, err := strconv.ParseUint(line[i+1:], 10, 64)
	if err != nil {
		t.Fatalf("DISTLOCK_FENCE %q: %v", line[i+1:], err)
	}
	return fence
}

func TestFenceIncreasesAcrossRuns(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	var last uint64
	for i := range 3 {
		f := fenceOf(t, env, db, "fenced job")
		if f <= last {
			t.Fatalf("run %d: DISTLOCK_FENCE %d, not above the previous %d", i, f, last)
		}
		last = f
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 1", 1},
		{"exit 42", 42},
		{"exit 75", 75}, // CMD's own 75 too: stderr tells them apart
		{"kill -KILL $$", 128 + int(syscall.SIGKILL)},
	} {
		code, _, errOut := runDL(t, env, "run", "--backend", db, "k", "--", "sh", "-c", tc.script)
		if code != tc.want {
			t.Errorf("sh -c %q: exit %d, want %d; stderr: %s", tc.script, code, tc.want, errOut)
		}
		if errOut != "" {
			t.Errorf("sh -c %q: distlock wrote to stderr: %s", tc.script, errOut)
		}
	}
	// The key is free after every one of them.
	if code, out, _ := runDL(t, env, "status", "--backend", db, "k"); code != exitFree {
		t.Errorf("status after the runs: exit %d, want %d (free); stdout: %s", code, exitFree, out)
	}
}

func TestCommandNotRunnable(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	code, _, errOut := runDL(t, env, "run", "--backend", db, "k", "--", "distlock-test-no-such-command")
	if code != exitNotFound || !strings.Contains(errOut, "not found") {
		t.Errorf("missing CMD: exit %d, stderr %q; want %d and 'not found'", code, errOut, exitNotFound)
	}
	script := filepath.Join(t.TempDir(), "noexec.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runDL(t, env, "run", "--backend", db, "k", "--", script)
	if code != exitNoExec {
		t.Errorf("CMD without execute permission: exit %d, stderr %q; want %d", code, errOut, exitNoExec)
	}
}

// holdKey starts a distlock that holds key until closeStdin, with CMD printing
// "started <fence>" and appending "<name> done" to logFile when released.
func holdKey(t *testing.T, env []string, backend, key, name, logFile string, extra ...string) (*dlProc, uint64) {
	t.Helper()
	args := append([]string{"run", "--backend", backend}, extra...)
	args = append(args, key, "--", "sh", "-c",
		`echo "started $DISTLOCK_FENCE"; read x; echo "$1 done" >> "$2"`, "sh", name, logFile)
	p := startDL(t, env, args...)
	var fence uint64
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for fence == 0 {
		select {
		case line := <-p.lines:
			if f, ok := strings.CutPrefix(line, "started "); ok {
				var err error
				if fence, err = strconv.ParseUint(f, 10, 64); err != nil {
					t.Fatalf("bad fence line %q", line)
				}
			}
		case <-p.done:
			t.Fatalf("holder exited %d before starting CMD; stderr: %s", p.code, p.stderr.String())
		case <-timer.C:
			t.Fatalf("holder did not start CMD within %v; stderr: %s", procTimeout, p.stderr.String())
		}
	}
	return p, fence
}

func TestConcurrentRunsExclude(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	log := filepath.Join(t.TempDir(), "log")
	a, fenceA := holdKey(t, env, db, "nightly", "A", log)

	// Without --wait, the second exits at once with the "held" status.
	code, out, errOut := runDL(t, env, "run", "--backend", db, "nightly", "--", "sh", "-c", "echo ran")
	if code != exitHeld || out != "" || !strings.Contains(errOut, "held by another owner") {
		t.Fatalf("second run: exit %d, stdout %q, stderr %q; want %d, no output, 'held by another owner'", code, out, errOut, exitHeld)
	}
	if n := strings.Count(errOut, "\n"); n != 1 {
		t.Errorf("second run printed %d lines to stderr, want one: %q", n, errOut)
	}

	// status sees the holder.
	code, out, errOut = runDL(t, env, "status", "--backend", db, "nightly")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("fence:     %d\n", fenceA)) || !strings.Contains(out, "owner:") || !strings.Contains(out, "remaining:") {
		t.Fatalf("status: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// With --wait, a third waits for the first and then runs.
	c := startDL(t, env, "run", "-v", "--wait=60s", "--backend", db, "nightly", "--", "sh", "-c",
		`echo "C $DISTLOCK_FENCE" >> "$1"`, "sh", log)
	c.closeStdin()
	c.waitStderr(`"nightly" is held by another owner; waiting`)
	a.closeStdin()
	a.expect(0)
	c.expect(0)
	lines := readLines(t, log)
	if len(lines) != 2 || lines[0] != "A done" || !strings.HasPrefix(lines[1], "C ") {
		t.Fatalf("log %q: want A done, then C", lines)
	}
	fenceC, err := strconv.ParseUint(strings.TrimPrefix(lines[1], "C "), 10, 64)
	if err != nil || fenceC <= fenceA {
		t.Fatalf("the waiter's fence %q is not above the first holder's %d", lines[1], fenceA)
	}
}

func TestWaitTimeout(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	a, _ := holdKey(t, env, db, "k", "A", filepath.Join(t.TempDir(), "log"))
	start := time.Now()
	code, out, errOut := runDL(t, env, "run", "--wait=300ms", "--backend", db, "k", "--", "echo", "ran")
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("--wait=300ms gave up after %v", took)
	}
	if code != exitHeld || out != "" || !strings.Contains(errOut, "still held") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %d", code, out, errOut, exitHeld)
	}
	a.closeStdin()
	a.expect(0)
}

func TestSignalsAreForwarded(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			name := sigName(sig)
			p := startDL(t, env, "run", "--backend", db, "k", "--", "sh", "-c",
				`trap 'echo "got $1"; exit 9' `+name+`; echo ready; while :; do sleep 0.1; done`, "sh", name)
			p.waitLine("ready")
			p.signal(sig)
			p.waitLine("got " + name)
			p.expect(9)
			if code, out, _ := runDL(t, env, "status", "--backend", db, "k"); code != exitFree {
				t.Fatalf("after CMD exited: status %d (%s), want the key released", code, out)
			}
		})
	}
}

func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGHUP:
		return "HUP"
	}
	return sig.String()
}

// TestLeaseLossStopsCommand pauses distlock (SIGSTOP) past its ttl, lets another
// process take the key, and resumes it: distlock must see the loss, stop CMD and
// exit 124.
func TestLeaseLossStopsCommand(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	p := startDL(t, env, "run", "--backend", db, "--ttl", "1s", "k", "--", "sh", "-c",
		`trap 'echo "got TERM"; exit 0' TERM; echo "ready $DISTLOCK_FENCE"; while :; do sleep 0.1; done`)
	var fence uint64
	select {
	case line := <-p.lines:
		f, ok := strings.CutPrefix(line, "ready ")
		if !ok {
			t.Fatalf("CMD printed %q", line)
		}
		fence, _ = strconv.ParseUint(f, 10, 64)
	case <-time.After(procTimeout):
		t.Fatal("CMD did not start")
	}
	p.signal(syscall.SIGSTOP)
	resumed := false
	defer func() {
		if !resumed {
			p.signal(syscall.SIGCONT)
		}
	}()
	// Once the ttl has passed, another process acquires the key.
	var thief uint64
	waitFor(t, "another process to take the key of a paused holder", func() bool {
		code, out, errOut := runDL(t, env, "run", "--backend", db, "k", "--", "sh", "-c", `echo "$DISTLOCK_FENCE"`)
		switch code {
		case 0:
			thief, _ = strconv.ParseUint(strings.TrimSpace(out), 10, 64)
			return true
		case exitHeld:
			return false
		}
		t.Fatalf("thief: exit %d, stderr %s", code, errOut)
		return false
	})
	if thief <= fence {
		t.Fatalf("the second holder's fence %d is not above the paused holder's %d", thief, fence)
	}
	p.signal(syscall.SIGCONT)
	resumed = true
	p.waitLine("got TERM")
	p.expect(exitLost)
	if errOut := p.stderr.String(); !strings.Contains(errOut, `lost the lease on "k"`) {
		t.Fatalf("stderr does not explain the loss: %s", errOut)
	}
}

// TestKillAfter: a CMD that ignores SIGTERM gets SIGKILL --kill-after later.
func TestKillAfter(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	p := startDL(t, env, "run", "--backend", db, "--ttl", "1s", "--kill-after", "200ms", "k", "--", "sh", "-c",
		`trap '' TERM; echo ready; while :; do sleep 0.1; done`)
	p.waitLine("ready")
	p.signal(syscall.SIGSTOP)
	// Sleeping lets the ttl lapse while distlock is stopped.
	time.Sleep(1500 * time.Millisecond)
	p.signal(syscall.SIGCONT)
	p.expect(exitLost)
	errOut := p.stderr.String()
	if !strings.Contains(errOut, "sending SIGKILL") || !strings.Contains(errOut, "lost the lease") {
		t.Fatalf("stderr: %s", errOut)
	}
}

func TestMinHold(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	start := time.Now()
	code, _, errOut := runDL(t, env, "run", "--backend", db, "--min-hold", "700ms", "short", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if took := time.Since(start); took < 700*time.Millisecond {
		t.Fatalf("--min-hold 700ms: exited after %v", took)
	}

	// While --min-hold keeps it, the key is held after CMD exited; a signal then ends
	// distlock with CMD's status and leaves the lease to lapse at its ttl.
	p := startDL(t, env, "run", "--backend", db, "--ttl", "1s", "--min-hold", "1h", "k", "--", "sh", "-c", "echo done; exit 3")
	p.closeStdin()
	p.waitLine("done")
	waitFor(t, "CMD to exit", func() bool {
		return !processRunning(t, p.cmd.Process.Pid, "sh")
	})
	if code, out, errOut := runDL(t, env, "status", "--backend", db, "k"); code != 0 {
		t.Fatalf("status during --min-hold: exit %d, %s %s", code, out, errOut)
	}
	if code, _, _ := runDL(t, env, "run", "--backend", db, "k", "--", "true"); code != exitHeld {
		t.Fatalf("run during --min-hold: exit %d, want %d", code, exitHeld)
	}
	p.signal(syscall.SIGTERM)
	p.expect(3)
	waitFor(t, "the lease to lapse", func() bool {
		code, _, _ := runDL(t, env, "status", "--backend", db, "k")
		return code == exitFree
	})
}

// processRunning reports whether a child of pid named name is alive (Linux /proc).
func processRunning(t *testing.T, pid int, name string) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return false
	}
	for _, c := range strings.Fields(string(b)) {
		comm, err := os.ReadFile("/proc/" + c + "/comm")
		if err == nil && strings.TrimSpace(string(comm)) == name {
			return true
		}
	}
	return false
}

func TestDefaultBackendIsSQLiteInCacheDir(t *testing.T) {
	env := baseEnv(t)
	cache := t.TempDir()
	env = append(env, "XDG_CACHE_HOME="+cache)
	a, _ := holdKey(t, env, "", "job", "A", filepath.Join(t.TempDir(), "log"))
	code, _, errOut := runDL(t, env, "run", "job", "--", "echo", "hi")
	if code != exitHeld {
		t.Fatalf("second invocation on the default backend: exit %d (%s), want %d", code, errOut, exitHeld)
	}
	a.closeStdin()
	a.expect(0)
	if _, err := os.Stat(filepath.Join(cache, "distlock", "locks.db")); err != nil {
		t.Fatalf("default SQLite file: %v", err)
	}
	code, out, errOut := runDL(t, env, "run", "job", "--", "echo", "hi")
	if code != 0 || out != "hi\n" {
		t.Fatalf("after release: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestBackendFromEnvironment(t *testing.T) {
	db := filepath.Join(t.TempDir(), "env.db")
	env := append(baseEnv(t), envBackend+"=sqlite://"+db)
	if code, _, errOut := runDL(t, env, "run", "k", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("%s=sqlite://%s was not used: %v", envBackend, db, err)
	}
}

func TestBadUsageExits2(t *testing.T) {
	env := baseEnv(t)
	db := sqliteURL(t)
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"run"},
		{"run", "k"},
		{"run", "k", "--"},
		{"run", "--nope", "k", "--", "true"},
		{"run", "--ttl", "0s", "k", "--", "true"},
		{"run", "--ttl", "soon", "k", "--", "true"},
		{"run", "--wait=never", "k", "--", "true"},
		{"run", "--min-hold", "-1s", "k", "--", "true"},
		{"run", "--backend", "nope://x", "k", "--", "true"},
		{"run", "--backend", "no scheme", "k", "--", "true"},
		{"run", "--backend", "redis://h1,h2", "k", "--", "true"},
		{"run", "--backend", "redis://:secret@h:6379/x", "k", "--", "true"},
		{"run", "--backend", "sqlite://host/x.db", "k", "--", "true"},
		{"run", "--backend", "sqlite:///tmp/x.db?cache=shared", "k", "--", "true"},
		{"run", "--backend", "mysql://u:secret@h:3306/", "k", "--", "true"},
		{"run", "--backend", "postgres://u:secret@h/db?sslmode=bogus", "k", "--", "true"},
		{"run", "--backend", "etcd://", "k", "--", "true"},
		{"run", "--backend", "etcd://h:x", "k", "--", "true"},
		{"run", "--backend", db, "", "--", "true"},
		{"status"},
		{"status", "a", "b"},
		{"status", "--backend", "nope://", "k"},
	} {
		code, out, errOut := runDL(t, env, args...)
		if code != exitUsage {
			t.Errorf("distlock %q: exit %d, want %d; stderr %q", args, code, exitUsage, errOut)
			continue
		}
		if out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "distlock") {
			t.Errorf("distlock %q: want one line on stderr and nothing on stdout; stdout %q, stderr %q", args, out, errOut)
		}
		if strings.Contains(errOut, "secret") {
			t.Errorf("distlock %q: stderr shows the password: %q", args, errOut)
		}
	}
	code, out, _ := runDL(t, env, "help")
	if code != 0 || !strings.Contains(out, "exit status of run") {
		t.Errorf("help: exit %d, stdout %q", code, out)
	}
}

func TestBackendDown(t *testing.T) {
	env := baseEnv(t)
	// A loopback port that nothing listens on.
	code, _, errOut := runDL(t, env, "run", "--backend", "redis://127.0.0.1:1", "k", "--", "echo", "ran")
	if code != exitFailed || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("unreachable Redis: exit %d, stderr %q; want %d and one line", code, errOut, exitFailed)
	}
}

// TestUnresponsiveServerExitsPromptly: against a server that accepts connections
// and never answers, run gives up and exits without waiting out the clean-ups of
// the backend's Close (redlock's take about 10s there): it waits for them at most
// closeTimeout.
func TestUnresponsiveServerExitsPromptly(t *testing.T) {
	env := baseEnv(t)
	addr := silentServer(t)
	start := time.Now()
	code, _, errOut := runDL(t, env, "run", "--backend", "redlock://"+addr, "k", "--", "echo", "ran")
	took := time.Since(start)
	require.Equal(t, exitFailed, code, "stderr %q", errOut)
	// The TryLock takes a node timeout (200ms), then Close at most closeTimeout.
	require.Less(t, took, closeTimeout+4*time.Second, "exit after %v; stderr %q", took, errOut)
}

// silentServer listens on a loopback port, accepts every connection and never
// writes to it, until the test ends; it returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// readLines returns the lines of file.
func readLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
