package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/redlock"
)

// checkRedis checks a redis://, rediss:// or redis-sentinel:// backend with
// redislock's CheckServer: eviction, persistence, replicas (a failover loses
// what the replica had not received).
func checkRedis(ctx context.Context, u *backendURL) (*checkReport, error) {
	client, err := redisClient(ctx, u)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	l, err := redislock.New(client, nil)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	rep, err := l.CheckServer(ctx)
	if err != nil {
		return nil, err
	}
	r := redisReport(rep)
	if u.scheme == "redis-sentinel" {
		sentinelReport(ctx, r, client)
	}
	return r, nil
}

// sentinelReport names the master that the sentinels chose (go-redis calls the
// failover client's server "FailoverClient"), and notes what a failover does.
func sentinelReport(ctx context.Context, r *checkReport, client *redis.Client) {
	var master string
	if info, err := client.ClientInfo(ctx).Result(); err == nil && info != nil {
		master = info.LAddr // the master's side of this connection
	}
	if master != "" {
		name := "master " + master
		for i, s := range r.servers {
			r.servers[i] = strings.ReplaceAll(s, "FailoverClient", name)
		}
		for i := range r.findings {
			r.findings[i].setting = strings.ReplaceAll(r.findings[i].setting, "FailoverClient", name)
		}
	}
	r.add(sevNote, "sentinel", "", "Sentinel fails over to a replica that may lack the latest locks and fence increments; redislock's fences are as safe as that failover")
}

// checkRedlock checks every master of a redlock:// backend with redlock's
// CheckServer.
func checkRedlock(ctx context.Context, u *backendURL) (*checkReport, error) {
	clients, closeAll, err := redlockClients(ctx, u)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	maxTTL, err := redlockMaxTTL(u, 0)
	if err != nil {
		return nil, err
	}
	l, err := redlock.New(clients, &redlock.Options{MaxTTL: maxTTL})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	rep, err := l.CheckServer(ctx)
	if err != nil {
		return nil, err
	}
	r := redisReport(rep)
	if n := len(clients); n < 3 {
		r.add(sevNote, "masters", itoa(n), "RedLock over fewer than 3 masters survives no master's loss; use 3 or 5")
	} else if n%2 == 0 {
		r.add(sevNote, "masters", itoa(n), "an even number of masters tolerates no more losses than one fewer")
	}
	return r, nil
}

// redisReport turns a Report of CheckServer into check's findings: each Finding unsafe,
// or unchecked, and each setting read and not flagged ok.
func redisReport(rep redislock.Report) *checkReport {
	r := &checkReport{}
	flagged := make(map[[2]string]bool)
	for _, f := range rep.Findings {
		sev := sevUnsafe
		if f.Unchecked {
			sev = sevUnchecked
		}
		setting := f.Setting
		if f.Server != "" {
			setting = f.Server + " " + setting
		}
		r.add(sev, setting, f.Value, "%s", f.Message)
		flagged[[2]string{f.Server, f.Setting}] = true
	}
	for _, s := range rep.Servers {
		role := s.Role
		if s.Replicas > 0 {
			role += ", " + itoa(s.Replicas) + " replica(s)"
		}
		r.server("%s: Redis %s, %s, %s", s.Name, orDash(s.Version), orDash(s.Mode), orDash(role))
		if s.Config == nil {
			continue
		}
		for _, setting := range []string{"maxmemory-policy", "appendonly", "appendfsync"} {
			if setting == "appendfsync" && s.Config["appendonly"] != "yes" {
				continue
			}
			if v, ok := s.Config[setting]; ok && !flagged[[2]string{s.Name, setting}] {
				r.ok(s.Name+" "+setting, v)
			}
		}
	}
	return r
}

func itoa(n int) string { return strconv.Itoa(n) }

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
