package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redislock"
)

// openRedis opens redis://, rediss:// or redis-sentinel:// (see redisClient).
func openRedis(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	client, err := redisClient(ctx, u)
	if err != nil {
		return nil, err
	}
	l, err := redislock.New(client, &redislock.Options{Owner: o.owner})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &backend{locker: l, close: closeLocker(l.Close, func() { client.Close() })}, nil
}

// redisClient returns the client of
//
//	redis://[[user]:password@]host[:port][/db][?go-redis options][&TLS parameters]
//	rediss://...   the same over TLS
//	redis-sentinel://[[user]:password@]s1[:26379],s2,.../MASTER[/db][?sentinel_username=U&sentinel_password=P][&TLS parameters]
//
// The user and password of a redis-sentinel:// URL are the master's; the
// sentinels' are sentinel_username and sentinel_password (none by default).
func redisClient(ctx context.Context, u *backendURL) (*redis.Client, error) {
	if vals, ok := u.query["skip_verify"]; ok { // go-redis' name
		delete(u.query, "skip_verify")
		u.query["insecure_skip_verify"] = vals
	}
	tlsCfg, err := takeTLS(u, u.scheme == "rediss")
	if err != nil {
		return nil, err
	}
	if u.scheme == "redis-sentinel" {
		return sentinelClient(ctx, u, tlsCfg)
	}
	if len(u.hosts) != 1 {
		return nil, badURL(u, "want exactly one host (use redlock:// for several independent masters, redis-sentinel:// for sentinels)")
	}
	// go-redis parses the rest (database, dial_timeout, ...), without the TLS
	// parameters, which it does not know.
	v := &url.URL{Scheme: "redis", User: u.user, Host: u.hosts[0], Path: u.path, RawQuery: u.query.Encode()}
	opt, err := redis.ParseURL(v.String())
	if err != nil {
		var ue *url.Error // it quotes the URL, password included
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, badURL(u, "%s", newRedactor(u).text(err.Error()))
	}
	opt.TLSConfig = tlsCfg
	if tlsCfg != nil {
		// A certificate that does not verify is reported at once, not retried.
		if err := reachAny(ctx, "redis", []string{opt.Addr}, tlsCfg); err != nil && isTLSRefusal(err) {
			return nil, err
		}
	}
	return redis.NewClient(opt), nil
}

// sentinelClient returns a go-redis failover client of a redis-sentinel:// URL.
func sentinelClient(ctx context.Context, u *backendURL, tlsCfg *tls.Config) (*redis.Client, error) {
	addrs, err := u.hostsWithPort("26379")
	if err != nil {
		return nil, err
	}
	parts := strings.Split(strings.Trim(u.path, "/"), "/")
	if parts[0] == "" || len(parts) > 2 {
		return nil, badURL(u, "want the master's name as the path: redis-sentinel://host:26379/MASTER[/db]")
	}
	opt := &redis.FailoverOptions{MasterName: parts[0], SentinelAddrs: addrs}
	if len(parts) == 2 {
		if opt.DB, err = strconv.Atoi(parts[1]); err != nil || opt.DB < 0 {
			return nil, badURL(u, "bad database number %q", parts[1])
		}
	}
	if u.user != nil {
		opt.Username = u.user.Username()
		opt.Password, _ = u.user.Password()
	}
	for name, vals := range u.query {
		if len(vals) != 1 {
			return nil, badURL(u, "%s wants one value", name)
		}
		switch name {
		case "sentinel_username":
			opt.SentinelUsername = vals[0]
		case "sentinel_password":
			opt.SentinelPassword = vals[0]
		default:
			return nil, badURL(u, "unknown query parameter %q (want sentinel_username, sentinel_password or TLS parameters)", name)
		}
	}
	opt.TLSConfig = tlsCfg
	if tlsCfg != nil {
		if err := reachAny(ctx, "redis sentinel", addrs, tlsCfg); err != nil && isTLSRefusal(err) {
			return nil, err
		}
	}
	return redis.NewFailoverClient(opt), nil
}
