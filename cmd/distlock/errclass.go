package main

import (
	"errors"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"

	"github.com/distlock/distlock"
)

// permanent reports whether err, from opening a backend, would come back on every
// attempt: bad usage, or a server that refused the credentials, the database or
// the certificate. run --wait retries every other error (a refused connection, a
// server starting up or shutting down), so that it waits through an outage.
func permanent(err error) bool {
	if isUsage(err) || errors.Is(err, distlock.ErrInvalid) || isTLSRefusal(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 28: invalid authorization; 3D000: no such database; 42501:
		// insufficient privilege.
		return strings.HasPrefix(pgErr.Code, "28") || pgErr.Code == "3D000" || pgErr.Code == "42501"
	}
	var myErr *mysqldriver.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1044, 1045, 1049, 1142, 1227, 1698: // access denied, unknown database, no privilege
			return true
		}
		return false
	}
	var redisErr redis.Error
	if errors.As(err, &redisErr) {
		msg := redisErr.Error()
		for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "ERR AUTH"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		switch etcdErr.Code() {
		case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument, codes.FailedPrecondition:
			return true
		}
	}
	return false
}
