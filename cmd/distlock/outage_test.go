package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUnreachableSaysRefused: with no ZooKeeper or etcd server listening, run,
// status and check fail at once and say "connection refused" (the clients retry in
// the background, and distlock used to give up after 15s with "deadline exceeded").
func TestUnreachableSaysRefused(t *testing.T) {
	env := baseEnv(t)
	closed := closedAddr(t)
	for _, scheme := range []string{"zk", "etcd"} {
		backend := scheme + "://" + closed
		for _, args := range [][]string{
			{"run", "--backend", backend, "k", "--", "true"},
			{"status", "--backend", backend, "k"},
			{"check", "--backend", backend},
		} {
			start := time.Now()
			code, out, errOut := runDL(t, env, args...)
			took := time.Since(start)
			require.Equal(t, exitFailed, code, "distlock %q: stdout %q, stderr %q", args, out, errOut)
			require.Contains(t, errOut, "connection refused", "distlock %q", args)
			require.Less(t, took, 5*time.Second, "distlock %q: stderr %q", args, errOut)
		}
	}
}

// restartable is a server that a test can crash and start again.
type restartable interface {
	Kill(testing.TB)
	Restart(testing.TB)
	Running() bool
}

// TestWaitThroughOutage: run --wait started while the backend's server is down
// (killed) keeps trying, says so once, and runs CMD when the server is back. It
// used to exit 125 at once on PostgreSQL and MariaDB (opening the backend was not
// retried).
func TestWaitThroughOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  restartable
	}{
		{"postgres", servers.postgres},
		{"mysql", servers.mariadb},
		{"etcd", servers.etcd},
		{"zk", servers.zk},
		{"redis", servers.redis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := baseEnv(t)
			key := fmt.Sprintf("outage %s %d", tc.name, time.Now().UnixNano())
			tc.srv.Kill(t)
			t.Cleanup(func() {
				if !tc.srv.Running() {
					tc.srv.Restart(t)
				}
			})
			p := startDL(t, env, "run", "--wait=90s", "--backend", backendURLs[tc.name], key, "--", "echo", "ran")
			p.closeStdin()
			waitStderrOrExit(p, "still trying (--wait)")
			tc.srv.Restart(t)
			p.expect(0)
			require.Equal(t, "ran\n", p.stdout.String())
			errOut := p.stderr.String()
			require.Equal(t, 1, strings.Count(errOut, "still trying"), "want the outage reported once: %s", errOut)
			require.NotContains(t, errOut, "[mysql]")
		})
	}
}

// waitStderrOrExit waits until p's stderr contains want, failing at once if p
// exits first.
func waitStderrOrExit(p *dlProc, want string) {
	p.t.Helper()
	waitFor(p.t, fmt.Sprintf("distlock to print %q", want), func() bool {
		if strings.Contains(p.stderr.String(), want) {
			return true
		}
		select {
		case <-p.done:
			p.t.Fatalf("distlock %v exited %d before printing %q; stderr:\n%s", p.cmd.Args[1:], p.code, want, p.stderr.String())
		default:
		}
		return false
	})
}
