package redisx

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Run runs s on c as redis.Script.Run does: EVALSHA, and EVAL when the server does
// not have the script cached (after a restart, a failover or SCRIPT FLUSH). Unlike
// Script.Run, the EVAL does not fail merely because ctx ended while the EVALSHA
// waited for its NOSCRIPT reply: it then runs on a fresh context, without ctx's
// cancellation, bounded by retry. A caller that has stopped waiting for this call
// (its result goes to a late-answer handler) still learns what the server did,
// instead of an error from a request that was never sent.
//
// The script is sent in full only when NOSCRIPT says so, so the happy path costs one
// round trip with the script's hash.
func Run(ctx context.Context, c redis.Scripter, s *redis.Script, retry time.Duration, keys []string, args ...any) *redis.Cmd {
	r := s.EvalSha(ctx, c, keys, args...)
	if !IsNoScript(r.Err()) {
		return r
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), retry)
		defer cancel()
	}
	return s.Eval(ctx, c, keys, args...)
}

// IsNoScript reports whether err is the server's NOSCRIPT error (the script is not
// in its cache).
func IsNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
