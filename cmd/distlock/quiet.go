package main

import (
	"context"
	"io"
	"log"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/grpclog"
)

// quietClientLogs silences the loggers of every client library that distlock
// links, which print to stderr on their own: go-redis (each failed dial),
// go-sql-driver/mysql ("closing bad idle connection" after a server restart),
// gRPC under etcd's client (failed connections), go-zookeeper (every dial and
// reconnection) and the standard logger that some of them fall back on. distlock
// reports the errors that result, once, in its own words; its stderr is the
// user's. It changes global state of those packages, so only main calls it, first.
func quietClientLogs() {
	redis.SetLogger(discardLogger{})
	_ = mysqldriver.SetLogger(log.New(io.Discard, "", 0))
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	zk.DefaultLogger = zkQuiet{}
	log.SetOutput(io.Discard)
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// zkQuiet is a zk.Logger that drops everything.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}
