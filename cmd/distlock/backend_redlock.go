package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redlock"
)

// openRedlock opens redlock://[[user]:password@]h1:p1,h2:p2,h3:p3[/db]: one
// go-redis client per independent master (port 6379 by default), each with the
// same credentials and database number.
func openRedlock(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	addrs, err := u.hostsWithPort("6379")
	if err != nil {
		return nil, err
	}
	if err := u.noQuery(); err != nil {
		return nil, err
	}
	db := 0
	if p := strings.Trim(u.path, "/"); p != "" {
		if db, err = strconv.Atoi(p); err != nil || db < 0 {
			return nil, badURL(u, "bad database number %q", p)
		}
	}
	var user, pass string
	if u.user != nil {
		user = u.user.Username()
		pass, _ = u.user.Password()
	}
	clients := make([]redis.UniversalClient, len(addrs))
	closeAll := func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, Username: user, Password: pass, DB: db})
	}
	l, err := redlock.New(clients, &redlock.Options{Owner: o.owner})
	if err != nil {
		closeAll()
		return nil, err
	}
	return &backend{locker: l, close: closeAll}, nil
}
