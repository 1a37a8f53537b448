package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/internal/testenv"
)

// backendURLs are the real servers of this test binary, as distlock backend URLs,
// by name. startServers fills it in.
var backendURLs = map[string]string{}

// servers are the handles of the servers that tests stop, restart or configure,
// and the servers that only some tests use. startServers fills it in.
var servers struct {
	redis, etcd, zk *testenv.Server
	postgres        *testenv.PostgresServer
	mariadb         *testenv.MariaDBServer
	// redisAuth asks for the password redisAuthPassword.
	redisAuth *testenv.Server
	// redisUnsafe evicts any key under memory pressure (allkeys-lru).
	redisUnsafe *testenv.Server
	// redisTLS, etcdTLS and zkTLS listen only for TLS, with certificates that certs
	// signed.
	redisTLS, etcdTLS, zkTLS *testenv.Server
	certs                    *testCerts
	// sentinel is a Redis Sentinel that monitors the master "mymaster" (the
	// server of backendURLs["redis"]); empty when redis-server cannot run one.
	sentinel string
}

// redisAuthPassword is the password of servers.redisAuth.
const redisAuthPassword = "s3cret-Redis-pw"

// startServers starts one server per backend (or uses the ones the DISTLOCK_*
// variables name) and records their URLs.
func startServers(env *testenv.Env) error {
	redisSrv, err := env.Redis()
	if err != nil {
		return err
	}
	backendURLs["redis"] = "redis://" + redisSrv.Addr()
	servers.redis = redisSrv

	nodes, err := env.RedisNodes(3)
	if err != nil {
		return err
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	backendURLs["redlock"] = "redlock://" + strings.Join(addrs, ",")

	etcd, err := env.Etcd()
	if err != nil {
		return err
	}
	backendURLs["etcd"] = "etcd://" + strings.TrimPrefix(etcd.Addr(), "http://")
	servers.etcd = etcd

	zk, err := env.ZooKeeper()
	if err != nil {
		return err
	}
	backendURLs["zk"] = "zk://" + zk.Addr()
	servers.zk = zk

	pg, err := env.Postgres()
	if err != nil {
		return err
	}
	backendURLs["postgres"] = pg.URL
	servers.postgres = pg

	maria, err := env.MariaDB()
	if err != nil {
		return err
	}
	if backendURLs["mysql"], err = mysqlURL(maria.DSN); err != nil {
		return err
	}
	servers.mariadb = maria
	return startExtraServers(env, redisSrv)
}

// startExtraServers starts the servers that only some tests use.
func startExtraServers(env *testenv.Env, master *testenv.Server) error {
	var err error
	if servers.redisAuth, err = env.Redis(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := testenv.RedisCommand(ctx, servers.redisAuth.Addr(), "CONFIG", "SET", "requirepass", redisAuthPassword); err != nil {
		return err
	}
	if servers.redisUnsafe, err = env.RedisWith("--maxmemory-policy", "allkeys-lru"); err != nil {
		return err
	}
	if servers.certs, err = makeCerts(env.TempDir()); err != nil {
		return err
	}
	if servers.redisTLS, err = startRedisTLS(env, servers.certs); err != nil {
		return err
	}
	if servers.etcdTLS, err = startEtcdTLS(env, servers.certs); err != nil {
		return err
	}
	if servers.zkTLS, err = startZooKeeperTLS(env, servers.certs); err != nil {
		return err
	}
	servers.sentinel, err = startSentinel(env, master)
	return err
}

// mysqlURL turns a go-sql-driver/mysql DSN over TCP into distlock's mysql:// URL.
func mysqlURL(dsn string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	if cfg.Net != "tcp" {
		return "", fmt.Errorf("MySQL DSN %q: want a tcp address", dsn)
	}
	u := &url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	return u.String(), nil
}
