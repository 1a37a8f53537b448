package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTLS runs commands under locks on servers that accept only TLS, with
// certificates signed by a CA that the test made: each backend verifies the
// server against ca_file, refuses it without (at once, even with --wait), and
// accepts it with insecure_skip_verify; check works over TLS too.
func TestTLS(t *testing.T) {
	env := baseEnv(t)
	ca := url.QueryEscape(servers.certs.ca)
	redisAddr, etcdAddr, zkAddr := servers.redisTLS.Addr(), servers.etcdTLS.Addr(), servers.zkTLS.Addr()
	for _, tc := range []struct {
		name string
		base string // the URL without TLS parameters
		sep  string // "?" or "&" before the TLS parameters
	}{
		{"redis", "redis://" + redisAddr, "?"},
		{"rediss", "rediss://" + redisAddr + "/0", "?"},
		{"redlock", "redlock://" + redisAddr + "?max_ttl=2m", "&"},
		{"etcd", "etcd://" + etcdAddr + "/tls", "?"},
		{"zk", "zk://" + zkAddr + "/tls", "?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("tls %s %d", tc.name, time.Now().UnixNano())
			verified := tc.base + tc.sep + "ca_file=" + ca
			if tc.name != "rediss" {
				verified += "&tls=true"
			}
			f1 := fenceOf(t, env, verified, key)
			f2 := fenceOf(t, env, tc.base+tc.sep+"insecure_skip_verify=true", key)
			require.Greater(t, f2, f1)

			code, out, errOut := runDL(t, env, "check", "--backend", verified)
			require.Equal(t, 0, code, "check: stdout:\n%s\nstderr:\n%s", out, errOut)
			if tc.name == "zk" { // testenv's ZooKeeper runs with forceSync=no; this one with the default
				require.Contains(t, out, "ok         "+zkAddr+" forceSync=yes (inferred")
			}

			// Without the CA, the certificate does not verify: that is final.
			unverified := tc.base + tc.sep + "tls=true"
			if tc.name == "rediss" {
				unverified = tc.base
			}
			start := time.Now()
			code, _, errOut = runDL(t, env, "run", "--wait=60s", "--backend", unverified, key, "--", "true")
			require.Equal(t, exitFailed, code, "stderr %q", errOut)
			require.Contains(t, errOut, "certificate signed by unknown authority")
			require.Less(t, time.Since(start), 15*time.Second, "stderr %q", errOut)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "stderr %q", errOut)
		})
	}
}

func TestTLSParameters(t *testing.T) {
	env := baseEnv(t)
	for _, tc := range []struct {
		backend string
		want    string
	}{
		{"etcd://h?cert_file=/c.pem", "cert_file and key_file go together"},
		{"zk://h?tls=false&ca_file=/ca.pem", "tls=false with other TLS parameters"},
		{"redlock://h1,h2,h3?ca_file=/nonexistent/ca.pem", "ca_file: open /nonexistent/ca.pem"},
		{"redis://h?tls=maybe", "tls=maybe: want true or false"},
		{"redis-sentinel://h/m?insecure_skip_verify=x", "insecure_skip_verify=x: want true or false"},
	} {
		code, _, errOut := runDL(t, env, "run", "--backend", tc.backend, "k", "--", "true")
		require.Equal(t, exitUsage, code, "%s: stderr %q", tc.backend, errOut)
		require.Contains(t, errOut, tc.want, tc.backend)
	}
}
