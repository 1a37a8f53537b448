package main

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// quietClientLogs silences go-redis' own logger, which prints every failed dial
// to stderr; distlock reports the error that results, once. It changes global
// state of go-redis: only main calls it.
func quietClientLogs() { redis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
