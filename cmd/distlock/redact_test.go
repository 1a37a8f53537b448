package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/internal/testenv"
)

// closedAddr returns a loopback address that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// TestRedactionThroughBinary runs the binary with passwords in backend URLs (on
// the command line and in DISTLOCK_BACKEND) that fail in every way a user meets:
// a bad URL, a server that is down, a wrong password, a missing database. No
// password may appear on stdout or stderr, and the rest of each message must stay
// intact: a short password such as "1" must not be replaced inside the address.
func TestRedactionThroughBinary(t *testing.T) {
	env := baseEnv(t)
	closed := closedAddr(t)
	pg, err := url.Parse(backendURLs["postgres"])
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		args    []string
		env     string // DISTLOCK_BACKEND
		code    int
		secrets []string
		want    []string // substrings of stderr
	}{
		{name: "password 1, server down", args: []string{"run", "--backend", "postgres://u:1@" + closed + "/db?sslmode=disable", "k", "--", "true"},
			code: exitFailed, want: []string{closed, "connection refused"}},
		{name: "password 1, no such database", args: []string{"run", "--backend", "postgres://postgres:1@" + pg.Host + "/nodb?sslmode=disable", "k", "--", "true"},
			code: exitFailed, want: []string{pg.Host, `database "nodb" does not exist`}},
		{name: "wrong Redis password", args: []string{"run", "--backend", "redis://:s3cret-wrong@" + servers.redisAuth.Addr(), "k", "--", "true"},
			code: exitFailed, secrets: []string{"s3cret-wrong"}, want: []string{"WRONGPASS"}},
		{name: "bad port", args: []string{"run", "--backend", "redis://:s3cret-B@h:x/0", "k", "--", "true"},
			code: exitUsage, secrets: []string{"s3cret-B"}, want: []string{"redis://:xxxxx@h:x/0", `invalid port ":x" after host`}},
		{name: "escaped password", args: []string{"run", "--backend", "redis://:p%40ss%3Aw%2Frd-C@h:x", "k", "--", "true"},
			code: exitUsage, secrets: []string{"p@ss:w/rd-C", "p%40ss%3Aw%2Frd-C"}, want: []string{"redis://:xxxxx@h:x"}},
		{name: "MySQL down", args: []string{"run", "--backend", "mysql://u:s3cret-D@" + closed + "/db", "k", "--", "true"},
			code: exitFailed, secrets: []string{"s3cret-D"}, want: []string{closed, "connection refused"}},
		{name: "MySQL no database", args: []string{"run", "--backend", "mysql://u:s3cret-E@h:3306/", "k", "--", "true"},
			code: exitUsage, secrets: []string{"s3cret-E"}, want: []string{"mysql://u:xxxxx@h:3306/"}},
		{name: "bad sslmode", args: []string{"run", "--backend", "postgres://u:s3cret-F@h/db?sslmode=bogus", "k", "--", "true"},
			code: exitUsage, secrets: []string{"s3cret-F"}},
		{name: "etcd down", args: []string{"run", "--backend", "etcd://u:s3cret-G@" + closed, "k", "--", "true"},
			code: exitFailed, secrets: []string{"s3cret-G"}, want: []string{"connection refused"}},
		{name: "sentinel password in the query", args: []string{"run", "--backend", "redis-sentinel://:s3cret-H@" + closed + "/m?sentinel_password=s3cret-I", "k", "--", "true"},
			code: exitFailed, secrets: []string{"s3cret-H", "s3cret-I"}},
		{name: "unknown query parameter", args: []string{"run", "--backend", "redlock://:s3cret-J@h1,h2,h3/0?sentinel_password=s3cret-K&bogus=1", "k", "--", "true"},
			code: exitUsage, secrets: []string{"s3cret-J", "s3cret-K"}, want: []string{"redlock://:xxxxx@h1,h2,h3/0?bogus=1&sentinel_password=xxxxx"}},
		{name: "no scheme", args: []string{"run", "--backend", "u:s3cret-L@host", "k", "--", "true"},
			code: exitUsage, secrets: []string{"s3cret-L"}},
		{name: "environment, status", args: []string{"status", "k"}, env: "redis://:s3cret-M@" + closed,
			code: exitFailed, secrets: []string{"s3cret-M"}, want: []string{"connection refused"}},
		{name: "check", args: []string{"check", "--backend", "mysql://u:s3cret-N@" + closed + "/db"},
			code: exitFailed, secrets: []string{"s3cret-N"}, want: []string{"connection refused"}},
		{name: "unknown scheme", args: []string{"check", "--backend", "mongodb://u:s3cret-O@h/db"},
			code: exitUsage, secrets: []string{"s3cret-O"}, want: []string{"mongodb://u:xxxxx@h/db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := env
			if tc.env != "" {
				e = append(e[:len(e):len(e)], envBackend+"="+tc.env)
			}
			code, out, errOut := runDL(t, e, tc.args...)
			require.Equal(t, tc.code, code, "stdout %q, stderr %q", out, errOut)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "want one line: %q", errOut)
			for _, s := range tc.secrets {
				require.NotContains(t, out+errOut, s)
			}
			for _, w := range tc.want {
				require.Contains(t, errOut, w)
			}
			require.NotRegexp(t, `xxxxx[0-9.]|[0-9.]xxxxx`, errOut, "a password was replaced inside other text")
		})
	}
}

// TestAuthFailureDoesNotWait: --wait waits through an outage, not through a
// password the server refuses; and the right password works, and is not logged.
func TestAuthFailureDoesNotWait(t *testing.T) {
	env := baseEnv(t)
	start := time.Now()
	code, _, errOut := runDL(t, env, "run", "--wait", "--backend", "redis://:s3cret-wrong@"+servers.redisAuth.Addr(), "k", "--", "true")
	require.Equal(t, exitFailed, code, "stderr %q", errOut)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Contains(t, errOut, "WRONGPASS")

	backend := "redis://:" + redisAuthPassword + "@" + servers.redisAuth.Addr()
	code, out, errOut := runDL(t, env, "run", "-v", "--backend", backend, "k", "--", "echo", "ran")
	require.Equal(t, 0, code, "stderr %q", errOut)
	require.Equal(t, "ran\n", out)
	require.NotContains(t, errOut, redisAuthPassword)
}

func TestRedacted(t *testing.T) {
	for raw, want := range map[string]string{
		"redlock://user:s3cret@h1,h2/0":               "redlock://user:xxxxx@h1,h2/0",
		"redis://:p%40ss@h:1/2?sentinel_password=zz":  "redis://:xxxxx@h:1/2?sentinel_password=xxxxx",
		"postgres://u:1@127.0.0.1:5/db?sslmode=off":   "postgres://u:xxxxx@127.0.0.1:5/db?sslmode=off",
		"sqlite:///tmp/x.db":                          "sqlite:///tmp/x.db",
		"sqlite:rel.db":                               "sqlite:rel.db",
		"etcd://[::1]:2379/pre":                       "etcd://[::1]:2379/pre",
		"mysql://u@h/db":                              "mysql://u@h/db",
		"postgres://h/db?password=pw&sslpassword=pw2": "postgres://h/db?password=xxxxx&sslpassword=xxxxx",
	} {
		u, err := parseBackendURL(raw)
		require.NoError(t, err, raw)
		require.Equal(t, want, u.redacted(), raw)
	}
	u, err := parseBackendURL("postgres://u:1@127.0.0.1:5/db")
	require.NoError(t, err)
	require.Equal(t, `failed to connect to 127.0.0.1:5 as u:xxxxx@127.0.0.1 "postgres://u:xxxxx@127.0.0.1:5/db" 10.0.0.1`,
		newRedactor(u).text(`failed to connect to 127.0.0.1:5 as u:1@127.0.0.1 "postgres://u:1@127.0.0.1:5/db" 10.0.0.1`))
	require.Equal(t, "xxxxx@h", redactLoose("u:s3cret@h"))
}
