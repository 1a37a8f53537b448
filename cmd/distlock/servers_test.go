package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/internal/testenv"
)

// backendURLs are the real servers of this test binary, as distlock backend URLs,
// by name. startServers fills it in.
var backendURLs = map[string]string{}

// startServers starts one server per backend (or uses the ones the DISTLOCK_*
// variables name) and records their URLs.
func startServers(env *testenv.Env) error {
	redisSrv, err := env.Redis()
	if err != nil {
		return err
	}
	backendURLs["redis"] = "redis://" + redisSrv.Addr()

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

	zk, err := env.ZooKeeper()
	if err != nil {
		return err
	}
	backendURLs["zk"] = "zk://" + zk.Addr()

	pg, err := env.Postgres()
	if err != nil {
		return err
	}
	backendURLs["postgres"] = pg.URL

	maria, err := env.MariaDB()
	if err != nil {
		return err
	}
	if backendURLs["mysql"], err = mysqlURL(maria.DSN); err != nil {
		return err
	}
	return nil
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
