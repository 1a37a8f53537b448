package redisx

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Both backends store a lock as a string whose value starts with "<token>|": the
// token comes from driver.NewToken (base32: it never contains '|'), and what
// follows is the backend's own (redislock: the owner label; redlock: the fence and
// the owner label). The owner-checked scripts below compare that start with the
// token they are given followed by '|', so only the whole token matches; a Lease
// whose Token contains '|' is none of ours and owns nothing (see Ours).
//
// The scripts have no shebang line, so they run on Redis 2.6 and later. Every key a
// script touches is passed in KEYS and shares one hash tag (KeyNames), so on Redis
// Cluster each script runs on the one node that owns the key's slot.

// Ours reports whether token can be one of ours: a token that contains '|' owns
// nothing, and the caller must not send it to the owner-checked scripts (it could
// match the start of another token's value).
func Ours(token string) bool { return !strings.Contains(token, "|") }

// renewScript extends the lock when ARGV[1] still owns it, and never shortens it: it
// sets the time to live to ARGV[2] only when the lock has less than that left, so the
// server holds the lock until max(what it held, now + ttl). A Renew whose reply is
// lost therefore leaves the old Lease's Expires a valid bound, whatever ttl it asked
// for.
//
// KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl in ms. Returns 1 when the token owns
// the lock (now held for at least ARGV[2] ms), 0 when it does not.
var renewScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
return 0
`)

// renewManyScript is renewScript for many locks at once, on one standalone server
// (its keys need not share a slot): KEYS[i] lock key, ARGV[2i-1] its token, ARGV[2i]
// its ttl in ms. Returns one value per lock, as renewScript's.
var renewManyScript = redis.NewScript(`
local r = {}
for i = 1, #KEYS do
  local t = ARGV[2 * i - 1]
  local ms = tonumber(ARGV[2 * i])
  local v = redis.call('GET', KEYS[i])
  if v and string.sub(v, 1, #t + 1) == t .. '|' then
    if redis.call('PTTL', KEYS[i]) < ms then
      redis.call('PEXPIRE', KEYS[i], ms)
    end
    r[i] = 1
  else
    r[i] = 0
  end
end
return r
`)

// unlockScript deletes the lock when ARGV[1] still owns it and announces the release
// on the key's channel.
//
// KEYS[1] lock key; ARGV[1] token, ARGV[2] release channel. Returns 1 when it deleted
// the lock, 0 when the token did not own it.
var unlockScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '')
  return 1
end
return 0
`)

// UnlockScriptHash returns the SHA1 of the unlock script, for tests that watch for it.
func UnlockScriptHash() string { return unlockScript.Hash() }

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
