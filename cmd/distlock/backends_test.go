package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackends runs the CLI against every real server: fences increase, a held key
// makes the second run exit 75, status reports the holder, and a waiter runs once
// the holder is done.
func TestBackends(t *testing.T) {
	names := make([]string, 0, len(backendURLs))
	for name := range backendURLs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		backend := backendURLs[name]
		t.Run(name, func(t *testing.T) {
			env := baseEnv(t)
			key := fmt.Sprintf("cli test %s %d", name, time.Now().UnixNano())
			f1 := fenceOf(t, env, backend, key)
			f2 := fenceOf(t, env, backend, key)
			if f2 <= f1 {
				t.Fatalf("fences %d then %d: not increasing", f1, f2)
			}

			log := filepath.Join(t.TempDir(), "log")
			a, fenceA := holdKey(t, env, backend, key, "A", log)
			if fenceA <= f2 {
				t.Fatalf("holder's fence %d is not above %d", fenceA, f2)
			}
			code, _, errOut := runDL(t, env, "run", "--backend", backend, key, "--", "true")
			if code != exitHeld {
				t.Fatalf("second run: exit %d, want %d; stderr: %s", code, exitHeld, errOut)
			}
			code, out, errOut := runDL(t, env, "status", "--backend", backend, key)
			if code != 0 || !strings.Contains(out, fmt.Sprintf("fence:     %d\n", fenceA)) {
				t.Fatalf("status of a held key: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			c := startDL(t, env, "run", "-v", "--wait=60s", "--backend", backend, key, "--", "sh", "-c",
				`echo "C $DISTLOCK_FENCE" >> "$1"`, "sh", log)
			c.closeStdin()
			c.waitStderr("is held by another owner; waiting")
			a.closeStdin()
			a.expect(0)
			c.expect(0)
			code, out, _ = runDL(t, env, "status", "--backend", backend, key)
			if code != exitFree {
				t.Fatalf("status after both: exit %d, stdout %q; want %d", code, out, exitFree)
			}
			var fenceC uint64
			lines := readLines(t, log)
			if len(lines) != 2 || lines[0] != "A done" {
				t.Fatalf("log %q: want A done, then C", lines)
			}
			if _, err := fmt.Sscanf(lines[1], "C %d", &fenceC); err != nil || fenceC <= fenceA {
				t.Fatalf("waiter's line %q: want a fence above %d", lines[1], fenceA)
			}
		})
	}
}

// TestZooKeeperCapsTTL: a ZooKeeper lock lives only as long as its session, whose
// timeout the server bounds, and a lease is certainly held for only 5/12 of it
// (zklock's cap with its default TickTime); a longer --ttl is capped at that.
func TestZooKeeperCapsTTL(t *testing.T) {
	env := baseEnv(t)
	code, out, errOut := runDL(t, env, "run", "-v", "--ttl", "10m", "--backend", backendURLs["zk"], "zk-cap", "--", "echo", "ran")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Equal(t, "ran\n", out)
	m := regexp.MustCompile(`the backend caps the ttl at (\S+) \(5/12 of the session timeout (\S+) that ZooKeeper granted\)`).FindStringSubmatch(errOut)
	require.NotNil(t, m, "stderr %q: want the ttl capped below the session timeout", errOut)
	capped, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	granted, err := time.ParseDuration(m[2])
	require.NoError(t, err)
	require.LessOrEqual(t, granted, 10*time.Minute)
	require.InDelta(t, float64(granted)*5/12, float64(capped), float64(time.Millisecond), "capped at %v of a %v session", capped, granted)
}

// TestRedlockLongTTL: a --ttl above redlock's default MaxTTL (1m) works, because
// the CLI raises MaxTTL to it; a max_ttl below --ttl is bad usage.
func TestRedlockLongTTL(t *testing.T) {
	env := baseEnv(t)
	backend := backendURLs["redlock"]
	key := fmt.Sprintf("redlock long ttl %d", time.Now().UnixNano())
	code, out, errOut := runDL(t, env, "run", "--ttl", "5m", "--backend", backend, key, "--", "echo", "ran")
	require.Equal(t, 0, code, "--ttl 5m: stderr %s", errOut)
	require.Equal(t, "ran\n", out)

	code, out, errOut = runDL(t, env, "run", "--ttl", "5m", "--backend", backend+"?max_ttl=10m", key, "--", "echo", "ran")
	require.Equal(t, 0, code, "--ttl 5m, max_ttl=10m: stderr %s", errOut)
	require.Equal(t, "ran\n", out)

	code, _, errOut = runDL(t, env, "run", "--ttl", "5m", "--backend", backend+"?max_ttl=1m", key, "--", "echo", "ran")
	require.Equal(t, exitUsage, code, "stderr %s", errOut)
	require.Contains(t, errOut, "max_ttl 1m0s is below the ttl 5m0s")
}
