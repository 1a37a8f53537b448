package main

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redislock"
)

// openRedis opens redis://[[user]:password@]host[:port][/db] (rediss:// for TLS),
// with go-redis' URL options (?dial_timeout=3s&...).
func openRedis(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	if len(u.hosts) != 1 {
		return nil, badURL(u, "want exactly one host (use redlock:// for several independent masters)")
	}
	opt, err := redis.ParseURL(u.raw)
	if err != nil {
		return nil, badURL(u, "%s", scrub(err.Error(), u))
	}
	client := redis.NewClient(opt)
	l, err := redislock.New(client, &redislock.Options{Owner: o.owner})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &backend{locker: l, close: closeLocker(l.Close, func() { client.Close() })}, nil
}

// scrub removes u's password from msg (library errors may quote the URL).
func scrub(msg string, u *backendURL) string {
	if u.user == nil {
		return msg
	}
	if p, ok := u.user.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}

// scrubbedError is an error whose message had a password removed; it still
// unwraps to the original, so errors.Is works.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrubErr returns err with u's password removed from its message, prefixed with
// prefix and ": " when prefix is not empty.
func scrubErr(prefix string, err error, u *backendURL) error {
	msg := scrub(err.Error(), u)
	if prefix != "" {
		msg = prefix + ": " + msg
	}
	return &scrubbedError{msg: msg, err: err}
}
