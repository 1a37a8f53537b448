package redislock

import "github.com/redis/go-redis/v9"

// The value of a lock key is "<token>|<owner>": the token comes from
// driver.NewToken (base32: it never contains '|'), and the owner label is
// everything after the first '|' (it may contain '|' itself). The fence lives only
// in the fence key: while a lock exists, the fence key holds the fence of its
// acquisition (the acquire script increments it right after it sets the lock, and
// nothing else does). A token is compared as "<token>|" against the start of the
// value, so only the whole token matches, and the Locker never sends a token that
// contains '|'. The owner-checked renew and unlock scripts are internal/redisx's,
// shared with package redlock.
//
// The scripts have no shebang line, so they run on Redis 2.6 and later. Every key a
// script touches is passed in KEYS and all of them share one hash tag, so on Redis
// Cluster each script runs on the one node that owns the key's slot.
//
// Locks written by the layout before this one ("<token>|<fence>|<owner>") are
// handled safely by these scripts (tokens compare alike, and fences come from the
// fence key), except that Inspect and ErrLocked report "<fence>|<owner>" as their
// owner label.

// acquireScript takes the lock if it is free and increments the fence in the same
// atomic step: the fast path is two commands (SET NX PX, INCR).
//
// KEYS[1] lock key, KEYS[2] fence key, KEYS[3] the token's abandoned marker
// (abandonedName); ARGV[1] the value "<token>|<owner>", ARGV[2] ttl in ms. Returns
// the new fence (an integer) on success, or {owner, pttl} when another token holds
// the lock. When the lock already holds the token (go-redis resent the script after
// a lost connection, and the first copy had run) it returns that acquisition's
// fence again, so a retried acquire is idempotent instead of reporting ErrLocked.
// It returns -1, and changes nothing, when the marker exists: the TryLock that
// sent it was abandoned and cleaned up (abandonScript), and this is a late copy.
var acquireScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then return -1 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local t = string.sub(ARGV[1], 1, string.find(ARGV[1], '|', 1, true))
if string.sub(v, 1, #t) == t then
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
local owner = ''
local i = string.find(v, '|', 1, true)
if i then owner = string.sub(v, i + 1) end
return {owner, redis.call('PTTL', KEYS[1])}
`)

// inspectScript reads the holder of a lock without its token.
//
// KEYS[1] lock key, KEYS[2] fence key. Returns nil when the lock is free, else
// {fence, owner, pttl}.
var inspectScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local owner = ''
local i = string.find(v, '|', 1, true)
if i then owner = string.sub(v, i + 1) end
return {redis.call('GET', KEYS[2]) or '0', owner, redis.call('PTTL', KEYS[1])}
`)

// abandonScript cleans up after a TryLock whose outcome is unknown: it sets the
// token's abandoned marker, so that a copy of the acquire that reaches the server
// later (held up on its connection or in the network) changes nothing, and
// deletes the lock if the token holds it (an earlier copy ran), announcing the
// release as Unlock does.
//
// KEYS[1] lock key, KEYS[2] the token's abandoned marker; ARGV[1] token, ARGV[2]
// release channel, ARGV[3] how long the marker lives, in ms. Returns 1 when it
// deleted the lock, else 0.
var abandonScript = redis.NewScript(`
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '')
  return 1
end
return 0
`)
