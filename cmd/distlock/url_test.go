package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseBackendURL(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		scheme string
		user   string
		hosts  []string
		path   string
		opaque string
	}{
		{raw: "redis://127.0.0.1:6379/2", scheme: "redis", hosts: []string{"127.0.0.1:6379"}, path: "/2"},
		{raw: "REDIS://h", scheme: "redis", hosts: []string{"h"}},
		{raw: "redlock://:p%40ss@h1:1,h2:2, h3:3/0", scheme: "redlock", user: ":p@ss", hosts: []string{"h1:1", "h2:2", "h3:3"}, path: "/0"},
		{raw: "zk://h1,h2/locks/app", scheme: "zk", hosts: []string{"h1", "h2"}, path: "/locks/app"},
		{raw: "etcd://u:p@[::1]:2379", scheme: "etcd", user: "u:p", hosts: []string{"[::1]:2379"}},
		{raw: "sqlite:///var/lib/x.db", scheme: "sqlite", path: "/var/lib/x.db"},
		{raw: "sqlite:rel/x.db", scheme: "sqlite", opaque: "rel/x.db"},
		{raw: "mysql://u:p@h:3306/db?parseTime=true", scheme: "mysql", user: "u:p", hosts: []string{"h:3306"}, path: "/db"},
	} {
		u, err := parseBackendURL(tc.raw)
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		user := ""
		if u.user != nil {
			user = u.user.Username()
			if p, ok := u.user.Password(); ok {
				user += ":" + p
			}
		}
		if u.scheme != tc.scheme || user != tc.user || !slices.Equal(u.hosts, tc.hosts) || u.path != tc.path || u.opaque != tc.opaque {
			t.Errorf("%s: got scheme %q user %q hosts %q path %q opaque %q", tc.raw, u.scheme, user, u.hosts, u.path, u.opaque)
		}
	}
	for _, raw := range []string{"", "nohost", "://x", "redis://a,,b", "redis://h#frag", "redis://h?%zz", "redis://u:%zz@h"} {
		if _, err := parseBackendURL(raw); err == nil || !isUsage(err) {
			t.Errorf("%q: error %v, want a usage error", raw, err)
		}
	}
}

func TestRedactedURL(t *testing.T) {
	u, err := parseBackendURL("redlock://user:s3cret@h1,h2/0")
	if err != nil {
		t.Fatal(err)
	}
	if got := u.redacted(); strings.Contains(got, "s3cret") || got != "redlock://user:xxxxx@h1,h2/0" {
		t.Fatalf("redacted %q", got)
	}
}

func TestWithPort(t *testing.T) {
	for in, want := range map[string]string{
		"h":         "h:2181",
		"h:1":       "h:1",
		"[::1]":     "[::1]:2181",
		"[::1]:5":   "[::1]:5",
		"10.0.0.1":  "10.0.0.1:2181",
		"h:":        "",
		":1":        "",
		"h:x":       "",
		"::1":       "",
		"h:1:2":     "",
		"host:2181": "host:2181",
	} {
		got, err := withPort(in, "2181")
		if want == "" {
			if err == nil {
				t.Errorf("withPort(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("withPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestParseRun(t *testing.T) {
	c, err := parseRun([]string{"--ttl=5s", "--wait", "--min-hold", "1m", "job", "--", "echo", "--flag"})
	if err != nil {
		t.Fatal(err)
	}
	if c.key != "job" || !slices.Equal(c.argv, []string{"echo", "--flag"}) || !c.wait.on || c.wait.timeout != 0 || c.ttl.Seconds() != 5 || c.minHold.Minutes() != 1 {
		t.Fatalf("parsed %+v", c)
	}
	c, err = parseRun([]string{"--wait=90s", "job", "true"})
	if err != nil || c.wait.timeout.Seconds() != 90 || !slices.Equal(c.argv, []string{"true"}) {
		t.Fatalf("parsed %+v, %v", c, err)
	}
}

func TestEnvHelpers(t *testing.T) {
	env := []string{"A=1", "DISTLOCK_FENCE=9", "B=2", "A=3"}
	if v, ok := lookupEnv(env, "A"); !ok || v != "3" {
		t.Fatalf("lookupEnv A = %q, %v", v, ok)
	}
	got := withEnv(env, "DISTLOCK_FENCE=10", "DISTLOCK_KEY=k")
	want := []string{"A=1", "B=2", "A=3", "DISTLOCK_FENCE=10", "DISTLOCK_KEY=k"}
	if !slices.Equal(got, want) {
		t.Fatalf("withEnv = %q, want %q", got, want)
	}
}

func TestUserCacheDir(t *testing.T) {
	if d, err := userCacheDir([]string{"HOME=/home/u"}); err != nil || d != "/home/u/.cache" {
		t.Fatalf("HOME only: %q, %v", d, err)
	}
	if d, err := userCacheDir([]string{"HOME=/home/u", "XDG_CACHE_HOME=/c"}); err != nil || d != "/c" {
		t.Fatalf("XDG_CACHE_HOME: %q, %v", d, err)
	}
	if _, err := userCacheDir(nil); err == nil {
		t.Fatal("no HOME: want an error")
	}
}

// TestRunInProcess calls run directly for what needs no backend.
func TestRunInProcess(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"help"}, nil, &out, &errOut, nil); code != 0 || !strings.Contains(out.String(), "distlock run [flags] KEY [flags] -- CMD") {
		t.Fatalf("help: %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"run", "--ttl", "x", "k", "--", "true"}, nil, &out, &errOut, nil); code != exitUsage {
		t.Fatalf("bad ttl: %d", code)
	}
	if !strings.HasPrefix(errOut.String(), "distlock run: --ttl x: want a duration") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

func TestRedlockMaxTTL(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		ttl  time.Duration
		want time.Duration // 0: a usage error
	}{
		{raw: "redlock://h1,h2,h3", ttl: 30 * time.Second, want: time.Minute},
		{raw: "redlock://h1,h2,h3", ttl: 5 * time.Minute, want: 5 * time.Minute},
		{raw: "redlock://h1,h2,h3?max_ttl=10m", ttl: 30 * time.Second, want: 10 * time.Minute},
		{raw: "redlock://h1,h2,h3?max_ttl=30s", ttl: 30 * time.Second, want: 30 * time.Second},
		{raw: "redlock://h1,h2,h3?max_ttl=10s", ttl: 30 * time.Second},
		{raw: "redlock://h1,h2,h3?max_ttl=x", ttl: time.Second},
		{raw: "redlock://h1,h2,h3?max_ttl=-1s", ttl: time.Second},
		{raw: "redlock://h1,h2,h3?max_ttl=1m&max_ttl=2m", ttl: time.Second},
		{raw: "redlock://h1,h2,h3?maxttl=1m", ttl: time.Second},
	} {
		u, err := parseBackendURL(tc.raw)
		require.NoError(t, err, tc.raw)
		got, err := redlockMaxTTL(u, tc.ttl)
		if tc.want == 0 {
			require.True(t, isUsage(err), "%s, ttl %v: got %v, %v; want a usage error", tc.raw, tc.ttl, got, err)
			continue
		}
		require.NoError(t, err, tc.raw)
		require.Equal(t, tc.want, got, "%s, ttl %v", tc.raw, tc.ttl)
	}
}
