package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParseThroughBinary runs the built binary on command lines as users of flock,
// timeout and other CLIs write them: flags after KEY, --wait with a separate value,
// a missing KEY, durations without a unit.
func TestParseThroughBinary(t *testing.T) {
	env := baseEnv(t)
	db := sqliteURL(t)
	for _, tc := range []struct {
		name   string
		args   []string // "DB" is replaced by the SQLite URL
		code   int
		stdout string // exact, when code is 0
		stderr string // substring; "" means stderr is empty
	}{
		{name: "flags after KEY", args: []string{"run", "job", "--backend", "DB", "--ttl", "5s", "--", "sh", "-c", `echo "$DISTLOCK_KEY"`}, stdout: "job\n"},
		{name: "--wait D before KEY", args: []string{"run", "--backend", "DB", "--wait", "1s", "job", "--", "sh", "-c", `echo "$DISTLOCK_KEY"`}, stdout: "job\n"},
		{name: "--wait D after KEY", args: []string{"run", "--backend", "DB", "job", "--wait", "1s", "--", "echo", "hi"}, stdout: "hi\n"},
		{name: "-w D", args: []string{"run", "--backend", "DB", "-w", "2m", "job", "--", "echo", "hi"}, stdout: "hi\n"},
		{name: "--wait=D", args: []string{"run", "--backend=DB", "--wait=1s", "job", "--", "echo", "hi"}, stdout: "hi\n"},
		{name: "bare --wait then KEY", args: []string{"run", "--backend", "DB", "--wait", "job", "--", "sh", "-c", `echo "$DISTLOCK_KEY"`}, stdout: "job\n"},
		{name: "CMD without --", args: []string{"run", "--backend", "DB", "job", "-v=false", "echo", "--ttl", "5s"}, stdout: "--ttl 5s\n"},
		{name: "CMD's flags after --", args: []string{"run", "--backend", "DB", "job", "--", "echo", "--wait", "1s", "--", "x"}, stdout: "--wait 1s -- x\n"},
		{name: "no KEY before --", args: []string{"run", "--backend", "DB", "--", "echo", "hi"}, code: exitUsage, stderr: "distlock run: missing KEY before --"},
		{name: "--wait D and no KEY", args: []string{"run", "--backend", "DB", "--wait", "1s", "--", "echo"}, code: exitUsage, stderr: "1s was taken as the timeout of --wait"},
		{name: "--ttl without unit", args: []string{"run", "--ttl", "10", "job", "--", "true"}, code: exitUsage, stderr: "distlock run: --ttl 10: want a duration with a unit, such as 10s"},
		{name: "--wait without unit", args: []string{"run", "--wait", "10", "job", "--", "true"}, code: exitUsage, stderr: "distlock run: --wait 10: want a duration with a unit, such as 10s"},
		{name: "--ttl not a duration", args: []string{"run", "job", "--ttl", "soon", "--", "true"}, code: exitUsage, stderr: "--ttl soon: want a duration such as 30s, 5m or 1h30m"},
		{name: "--ttl zero", args: []string{"run", "job", "--ttl", "0s", "--", "true"}, code: exitUsage, stderr: "--ttl 0s: must be positive"},
		{name: "--kill-after negative", args: []string{"run", "job", "--kill-after", "-1s", "--", "true"}, code: exitUsage, stderr: "--kill-after -1s: must not be negative"},
		{name: "--ttl without value", args: []string{"run", "job", "--ttl"}, code: exitUsage, stderr: "--ttl needs a value, such as --ttl 30s"},
		{name: "one dash", args: []string{"run", "-ttl", "5s", "job", "--", "true"}, code: exitUsage, stderr: "unknown flag -ttl: long flags take two dashes: --ttl"},
		{name: "unknown flag", args: []string{"run", "job", "--nope", "--", "true"}, code: exitUsage, stderr: "unknown flag --nope"},
		{name: "no CMD", args: []string{"run", "job", "--ttl", "5s"}, code: exitUsage, stderr: `missing CMD after KEY "job"`},
		{name: "status flag after KEY", args: []string{"status", "job", "--backend", "DB"}, code: exitFree, stdout: "\"job\" is free\n"},
		{name: "check flag", args: []string{"check", "--backend", "DB"}, code: 0},
		{name: "check extra argument", args: []string{"check", "DB"}, code: exitUsage, stderr: "unexpected argument"},
		{name: "--version", args: []string{"--version"}, code: 0},
		{name: "version", args: []string{"version"}, code: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "DB", db)
			}
			code, out, errOut := runDL(t, env, args...)
			require.Equal(t, tc.code, code, "distlock %q: stdout %q, stderr %q", args, out, errOut)
			if tc.stdout != "" {
				require.Equal(t, tc.stdout, out, "distlock %q: stderr %q", args, errOut)
			}
			if tc.stderr == "" {
				require.Empty(t, errOut, "distlock %q", args)
			} else {
				require.Contains(t, errOut, tc.stderr, "distlock %q", args)
				require.Equal(t, 1, strings.Count(errOut, "\n"), "distlock %q: want one line on stderr: %q", args, errOut)
			}
		})
	}
	code, out, _ := runDL(t, env, "--version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^distlock \S+ \(go1\.\S+, \w+/\w+\)\n$`, out)
}

// TestWaitAfterKey: "run KEY --wait D -- CMD" waits for a held KEY for D, then
// exits 75 (the old parser took --wait as CMD).
func TestWaitAfterKey(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	a, _ := holdKey(t, env, db, "k", "A", filepath.Join(t.TempDir(), "log"))
	start := time.Now()
	code, out, errOut := runDL(t, env, "run", "--backend", db, "k", "--wait", "300ms", "--", "echo", "ran")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Equal(t, exitHeld, code, "stdout %q, stderr %q", out, errOut)
	require.Contains(t, errOut, `"k" is still held by another owner after waiting 300ms`)
	a.closeStdin()
	a.expect(0)
}
