package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redlock"
)

// openRedlock opens redlock://[[user]:password@]h1:p1,h2:p2,h3:p3[/db][?max_ttl=D]:
// one go-redis client per independent master (port 6379 by default), each with the
// same credentials and database number.
//
// max_ttl is redlock.Options.MaxTTL, the longest ttl a lock on a master can have:
// a master that comes back empty is kept out of quorums for a little over the
// MaxTTL of the client that first reaches it. So every client of one set of
// masters must use the same MaxTTL, at least the longest ttl any of them uses.
// The default, the larger of --ttl and redlock.DefaultMaxTTL (1m), is the same on
// every client whose --ttl is at most 1m, and the library's default.
//
// The TLS parameters (see tlsconfig.go) apply to every master.
func openRedlock(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	clients, closeAll, err := redlockClients(ctx, u)
	if err != nil {
		return nil, err
	}
	maxTTL, err := redlockMaxTTL(u, o.ttl)
	if err != nil {
		closeAll()
		return nil, err
	}
	l, err := redlock.New(clients, &redlock.Options{Owner: o.owner, MaxTTL: maxTTL})
	if err != nil {
		closeAll()
		return nil, err
	}
	return &backend{locker: l, close: closeLocker(l.Close, closeAll)}, nil
}

// redlockClients returns one go-redis client per master of u, with u's TLS
// parameters (which it removes from u's query), and a function that closes them.
func redlockClients(ctx context.Context, u *backendURL) ([]redis.UniversalClient, func(), error) {
	addrs, err := u.hostsWithPort("6379")
	if err != nil {
		return nil, nil, err
	}
	tlsCfg, err := takeTLS(u, false)
	if err != nil {
		return nil, nil, err
	}
	db := 0
	if p := strings.Trim(u.path, "/"); p != "" {
		if db, err = strconv.Atoi(p); err != nil || db < 0 {
			return nil, nil, badURL(u, "bad database number %q", p)
		}
	}
	if tlsCfg != nil {
		// A certificate that does not verify is reported at once, not retried.
		if err := reachAny(ctx, "redlock", addrs, tlsCfg); err != nil && isTLSRefusal(err) {
			return nil, nil, err
		}
	}
	var user, pass string
	if u.user != nil {
		user = u.user.Username()
		pass, _ = u.user.Password()
	}
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		opt := &redis.Options{Addr: a, Username: user, Password: pass, DB: db}
		if tlsCfg != nil {
			opt.TLSConfig = tlsCfg.Clone()
		}
		clients[i] = redis.NewClient(opt)
	}
	closeAll := func() {
		for _, c := range clients {
			c.Close()
		}
	}
	return clients, closeAll, nil
}

// redlockMaxTTL returns the MaxTTL for a lease ttl of ttl: u's max_ttl, which
// must not be below ttl, or else the larger of ttl and redlock.DefaultMaxTTL.
func redlockMaxTTL(u *backendURL, ttl time.Duration) (time.Duration, error) {
	for name := range u.query {
		if name != "max_ttl" {
			return 0, badURL(u, "unknown query parameter %q (want max_ttl or TLS parameters)", name)
		}
	}
	vals, ok := u.query["max_ttl"]
	if !ok {
		return max(ttl, redlock.DefaultMaxTTL), nil
	}
	if len(vals) != 1 {
		return 0, badURL(u, "max_ttl given %d times", len(vals))
	}
	d, err := time.ParseDuration(vals[0])
	if err != nil || d <= 0 {
		return 0, badURL(u, "max_ttl %q: want a positive duration such as 5m", vals[0])
	}
	if d < ttl {
		return 0, badURL(u, "max_ttl %v is below the ttl %v: raise max_ttl on every client of these masters", d, ttl)
	}
	return d, nil
}
