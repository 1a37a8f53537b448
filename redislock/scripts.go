package redislock

import "github.com/redis/go-redis/v9"

// The value of a lock key is "<token>|<fence>|<owner>". The token comes from
// distlock.NewToken (base32: it never contains '|'), the fence is decimal, and the
// owner label is everything after the second '|' (it may contain '|' itself). The
// scripts split the value at the first two '|', so a Lease.Token that contains '|'
// can never match a stored token.
//
// The scripts have no shebang line, so they run on Redis 2.6 and later. Every key a
// script touches is passed in KEYS and all of them share one hash tag, so on Redis
// Cluster each script runs on the one node that owns the key's slot.

// acquireScript takes the lock if it is free and increments the fence in the same
// atomic step.
//
// KEYS[1] lock key, KEYS[2] fence key; ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] owner.
// Returns the new fence (an integer) on success, or {owner, pttl} when another token
// holds the lock. When the lock already holds ARGV[1] (go-redis resent the script
// after a lost connection, and the first copy had run) it returns that acquisition's
// fence again, so a retried acquire is idempotent instead of reporting ErrLocked.
var acquireScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local i = string.find(v, '|', 1, true)
  local j = i and string.find(v, '|', i + 1, true)
  if j and string.sub(v, 1, i - 1) == ARGV[1] then
    return tonumber(string.sub(v, i + 1, j - 1))
  end
  local owner = ''
  if j then owner = string.sub(v, j + 1) end
  return {owner, redis.call('PTTL', KEYS[1])}
end
local f = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. string.format('%d', f) .. '|' .. ARGV[3], 'PX', ARGV[2])
return f
`)

// renewScript extends the lock when ARGV[1] still owns it.
//
// KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl in ms. Returns the lease's fence on
// success, 0 when the token does not own the lock (fences start at 1).
var renewScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local i = string.find(v, '|', 1, true)
  local j = i and string.find(v, '|', i + 1, true)
  if j and string.sub(v, 1, i - 1) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(string.sub(v, i + 1, j - 1))
  end
end
return 0
`)

// unlockScript deletes the lock when ARGV[1] still owns it and announces the release
// on the key's channel.
//
// KEYS[1] lock key; ARGV[1] token, ARGV[2] release channel. Returns 1 when it deleted
// the lock, 0 when the token did not own it.
var unlockScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local i = string.find(v, '|', 1, true)
  if i and string.sub(v, 1, i - 1) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    redis.call('PUBLISH', ARGV[2], '')
    return 1
  end
end
return 0
`)

// inspectScript reads the holder of a lock without its token.
//
// KEYS[1] lock key. Returns nil when the lock is free, else {fence, owner, pttl}.
var inspectScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local i = string.find(v, '|', 1, true)
local j = i and string.find(v, '|', i + 1, true)
if not j then return {'0', '', redis.call('PTTL', KEYS[1])} end
return {string.sub(v, i + 1, j - 1), string.sub(v, j + 1), redis.call('PTTL', KEYS[1])}
`)
