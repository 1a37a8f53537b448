package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMySQLRestartQuiet: when MariaDB restarts under a held lock, the lease's
// next renewal finds its pooled connection dead, and go-sql-driver/mysql logs
// "[mysql] ... closing bad idle connection" to the process's stderr, which is the
// user's: distlock silences the driver's logger (and every client library's).
func TestMySQLRestartQuiet(t *testing.T) {
	env := baseEnv(t)
	key := fmt.Sprintf("mysql quiet %d", time.Now().UnixNano())
	p := startDL(t, env, "run", "-v", "--ttl", "6s", "--backend", backendURLs["mysql"], key, "--", "sh", "-c", `echo started; read x; exit 0`)
	p.waitLine("started")
	renewals := func() int { return strings.Count(p.stderr.String(), `msg="distlock renew"`) }
	before := renewals()
	servers.mariadb.Restart(t)
	// Two renewals after the restart: the first reuses the pooled connection
	// that the restart closed.
	waitFor(t, "two renewals after the restart", func() bool { return renewals() >= before+2 })
	p.closeStdin()
	p.expect(0)
	errOut := p.stderr.String()
	require.NotContains(t, errOut, "[mysql]")
	require.NotContains(t, errOut, "bad idle connection")
}
