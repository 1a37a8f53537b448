package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/distlock/distlock"
)

// envBackend names the default backend URL.
const envBackend = "DISTLOCK_BACKEND"

// A backend is an open Locker and the function that closes its client.
type backend struct {
	locker distlock.Locker
	close  func()
	// maxTTL, when not zero, caps the lease ttl, for the reason maxTTLWhy gives: a
	// ZooKeeper lease is certainly held for only part of its session's timeout,
	// which the server chose.
	maxTTL    time.Duration
	maxTTLWhy string
}

// closeLocker returns a backend's close function: it closes the Locker, which
// finishes the clean-ups that failed calls started (removing a lock that a TryLock
// with a lost reply may have made), and then the client that the Locker uses. It
// waits for the Locker at most closeTimeout: against a server that does not answer,
// the clean-ups run to their own timeouts (about 10s for redlock), and distlock
// exits without them; a lock they would have removed lapses at its ttl.
func closeLocker(lockerClose func() error, clientClose func()) func() {
	return func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = lockerClose()
		}()
		t := time.NewTimer(closeTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		clientClose()
	}
}

// openOptions are what every opener may use.
type openOptions struct {
	owner string        // owner label; "" means the backend's default
	ttl   time.Duration // the lease ttl (ZooKeeper's session timeout, redlock's MaxTTL derive from it)
}

// An opener connects to the backend that u names.
type opener func(ctx context.Context, u *backendURL, o openOptions) (*backend, error)

// openers maps each URL scheme to its backend.
func openers() map[string]opener {
	return map[string]opener{
		"redis":          openRedis,
		"rediss":         openRedis,
		"redis-sentinel": openRedis,
		"redlock":        openRedlock,
		"zk":             openZooKeeper,
		"etcd":           openEtcd,
		"postgres":       openPostgres,
		"postgresql":     openPostgres,
		"mysql":          openMySQL,
		"sqlite":         openSQLite,
	}
}

// A backendURL is a parsed backend URL. Unlike net/url it accepts a comma-separated
// list of hosts (redlock://h1,h2,h3).
type backendURL struct {
	raw    string
	scheme string        // lower case
	user   *url.Userinfo // nil when absent
	hosts  []string      // host[:port] each; empty for sqlite:///path
	path   string        // unescaped; "" or starting with '/' for hierarchical URLs
	opaque string        // for scheme:opaque (sqlite:rel/path.db)
	query  url.Values
	hier   bool // scheme://...
}

// badURL returns a usage error about u.
func badURL(u *backendURL, format string, args ...any) error {
	return usagef("backend URL %s: %s", u.redacted(), fmt.Sprintf(format, args...))
}

// authority returns the part of s (the URL after "scheme://") before the path or
// query.
func authority(s string) string {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		return s[:i]
	}
	return s
}

// parseBackendURL parses raw. It checks only the syntax common to every scheme;
// each opener checks the rest.
func parseBackendURL(raw string) (*backendURL, error) {
	u := &backendURL{raw: raw}
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/?#@ ") {
		return nil, usagef("backend URL %q has no scheme (want redis://, sqlite:///path, ...; see distlock help)", redactLoose(raw))
	}
	u.scheme = strings.ToLower(scheme)
	if strings.Contains(rest, "#") {
		return nil, badURL(u, "a fragment (#) is not allowed")
	}
	if !strings.HasPrefix(rest, "//") {
		u.opaque, u.query, ok = cutQuery(rest)
		if !ok {
			return nil, badURL(u, "bad query")
		}
		return u, nil
	}
	u.hier = true
	rest = rest[2:]
	auth := authority(rest)
	tail := rest[len(auth):]
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		info := auth[:at]
		auth = auth[at+1:]
		name, pass, hasPass := strings.Cut(info, ":")
		var err1, err2 error
		name, err1 = url.PathUnescape(name)
		pass, err2 = url.PathUnescape(pass)
		if err1 != nil || err2 != nil {
			return nil, usagef("backend URL %s://...: bad escape in the user name or password", u.scheme)
		}
		if hasPass {
			u.user = url.UserPassword(name, pass)
		} else {
			u.user = url.User(name)
		}
	}
	for _, h := range strings.Split(auth, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			if auth != "" {
				return nil, badURL(u, "empty host in the list %q", auth)
			}
			continue
		}
		if strings.ContainsAny(h, " \t\"'\\") {
			return nil, badURL(u, "bad host %q", h)
		}
		u.hosts = append(u.hosts, h)
	}
	path, query, ok := cutQuery(tail)
	if !ok {
		return nil, badURL(u, "bad query")
	}
	p, err := url.PathUnescape(path)
	if err != nil {
		return nil, badURL(u, "bad escape in the path %q", path)
	}
	u.path, u.query = p, query
	return u, nil
}

// cutQuery splits s at its first '?' and parses the query.
func cutQuery(s string) (string, url.Values, bool) {
	before, after, _ := strings.Cut(s, "?")
	q, err := url.ParseQuery(after)
	return before, q, err == nil
}

// withPort returns host with the default port appended when it has none, or an
// error when host:port is malformed.
func withPort(host, port string) (string, error) {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		// No port: "host", or "[::1]".
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			return net.JoinHostPort(host[1:len(host)-1], port), nil
		}
		if strings.Contains(host, ":") {
			return "", fmt.Errorf("bad host:port %q", host)
		}
		return net.JoinHostPort(host, port), nil
	}
	if h == "" || p == "" {
		return "", fmt.Errorf("bad host:port %q", host)
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return "", fmt.Errorf("bad port in %q", host)
		}
	}
	return host, nil
}

// hostsWithPort applies withPort to each of u's hosts, and requires at least one.
func (u *backendURL) hostsWithPort(port string) ([]string, error) {
	if len(u.hosts) == 0 {
		return nil, badURL(u, "no host")
	}
	out := make([]string, len(u.hosts))
	for i, h := range u.hosts {
		hp, err := withPort(h, port)
		if err != nil {
			return nil, badURL(u, "%v", err)
		}
		out[i] = hp
	}
	return out, nil
}

// noQuery returns a usage error when u has query parameters (for the schemes that
// take none, so that a typo is not silently ignored).
func (u *backendURL) noQuery() error {
	if len(u.query) > 0 {
		return badURL(u, "this scheme takes no query parameters")
	}
	return nil
}

// openBackend opens the backend named by raw, or by DISTLOCK_BACKEND in env when
// raw is empty, or the SQLite file in the user cache directory when both are.
func openBackend(ctx context.Context, raw string, env []string, o openOptions) (*backend, error) {
	if raw == "" {
		raw, _ = lookupEnv(env, envBackend)
	}
	if raw == "" {
		path, err := defaultSQLitePath(env)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create the directory of the default SQLite file: %w", err)
		}
		return openSQLiteFile(ctx, path, o)
	}
	u, err := parseBackendURL(raw)
	if err != nil {
		return nil, err
	}
	open, ok := openers()[u.scheme]
	if !ok {
		return nil, badURL(u, "unknown scheme %q (want %s)", u.scheme, schemeList)
	}
	red := newRedactor(u)
	b, err := open(ctx, u, o)
	if err != nil {
		if errors.Is(err, distlock.ErrInvalid) && !isUsage(err) {
			err = &usageError{err}
		}
		return nil, red.wrap(err)
	}
	return b, nil
}

// schemeList names the URL schemes, for messages.
const schemeList = "redis, rediss, redis-sentinel, redlock, zk, etcd, postgres, mysql or sqlite"

// defaultSQLitePath returns the SQLite file of the default backend:
// <user cache dir>/distlock/locks.db.
func defaultSQLitePath(env []string) (string, error) {
	dir, err := userCacheDir(env)
	if err != nil {
		return "", usagef("no --backend, no %s, and no user cache directory for the default SQLite file: %v", envBackend, err)
	}
	return filepath.Join(dir, "distlock", "locks.db"), nil
}

// userCacheDir is os.UserCacheDir on env instead of the process environment.
func userCacheDir(env []string) (string, error) {
	if runtime.GOOS == "darwin" {
		home, _ := lookupEnv(env, "HOME")
		if home == "" {
			return "", errors.New("$HOME is not defined")
		}
		return filepath.Join(home, "Library", "Caches"), nil
	}
	if dir, _ := lookupEnv(env, "XDG_CACHE_HOME"); dir != "" {
		if !filepath.IsAbs(dir) {
			return "", errors.New("$XDG_CACHE_HOME is a relative path")
		}
		return dir, nil
	}
	home, _ := lookupEnv(env, "HOME")
	if home == "" {
		return "", errors.New("neither $XDG_CACHE_HOME nor $HOME is defined")
	}
	return filepath.Join(home, ".cache"), nil
}
