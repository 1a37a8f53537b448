package redlock

import "github.com/redis/go-redis/v9"

// On every node, the value of a lock key is "<token>|<fence>|<owner>". The token comes
// from driver.NewToken (base32: it never contains '|'), the fence is decimal, and
// the owner label is everything after the second '|' (it may contain '|' itself). The
// scripts split the value at the first two '|', so a Lease.Token that contains '|'
// can never match a stored token. The owner-checked renew and unlock scripts, which
// compare the value's start with "<token>|", are internal/redisx's, shared with
// package redislock.
//
// The scripts have no shebang line, so they run on Redis 2.6 and later. Every key a
// script touches is passed in KEYS and all of them share one hash tag, so a node that
// is itself a Redis Cluster runs each script on the one shard that owns the slot.

// acquireScript is phase 1 of an acquisition on one node: take the lock if it is free
// and, in the same atomic step, increment the node's fence counter for the key. It
// first reads the node's own state (see nodestate.go): a node without a marker lost
// its data, and a node with no era yet or a quarantine does not count; neither takes
// the lock.
//
// It also keeps the key's turns (see turns.go), a sorted set of Locker IDs scored
// by the time since which the Locker waits (ARGV[7], the same on every node, so
// that the nodes agree on the order): when the lock is held and ARGV[6] is 'w' or
// 'a' (the Locker waits on the key), it adds ARGV[5] unless it is there already;
// when it takes the lock, it puts ARGV[5] at the end (scored ARGV[8], the
// TryLock's start) when ARGV[6] is 'a' (the Locker has more waiters on the key),
// and otherwise removes it. A Locker that does not wait on the key passes neither
// KEYS[5] nor ARGV[5] to ARGV[8], and the turns are left alone.
//
// KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] the node's marker, KEYS[4] its
// quarantine, KEYS[5] the key's turns; ARGV[1] token (also the epoch of a marker
// this call writes), ARGV[2] ttl in ms, ARGV[3] owner, ARGV[4] the quarantine in ms,
// ARGV[5] the Locker's ID, ARGV[6] 'w' or 'a', ARGV[7] since when the Locker waits
// (Locker.turnSince) and ARGV[8] the TryLock's start, in microseconds since 1970.
//
// Returns, with era the node's era:
//
//	{1, fence, era}                  the lock is (now) held by ARGV[1]; fence is the
//	                                 counter after the increment (just the fence,
//	                                 an integer, when era is 0: the usual case)
//	{0, 0, owner, pttl, era, digest}
//	                                 another token holds the lock; digest is the
//	                                 SHA-1 (hex) of its token, what its release
//	                                 publishes (releaseScript). The fence counter
//	                                 is not read (0): only the nodes an attempt
//	                                 locks count towards its fence
//	{2, epoch, quarantine pttl}      the node does not count: it just lost its data
//	                                 (this call wrote its marker), it is kept out
//	                                 (pttl > 0), or it waits for its era (pttl < 0)
//
// When the lock already holds ARGV[1] (go-redis resent the script after a lost
// connection and the first copy had run) it returns the fence stored with it,
// without incrementing again, so a resent acquire is idempotent. A counter that does
// not exist yet starts at era * 2^40.
//
// The marker, the quarantine and the lock are read with one MGET: a free node costs
// the script, the MGET, the INCR and the SET (4 commands in INFO's
// total_commands_processed; plus ZREM, or ZADD and PEXPIRE, when the Locker waits),
// a held one the script, the MGET and a PTTL (3; plus ZSCORE and, the first time,
// ZADD and PEXPIRE, when the Locker waits).
var acquireScript = redis.NewScript(`
local r = redis.call('MGET', KEYS[3], KEYS[4], KEYS[1])
local m, v = r[1], r[3]
if not m then
  redis.call('SET', KEYS[3], ARGV[1] .. '|')
  redis.call('SET', KEYS[4], '1', 'PX', ARGV[4])
  return {2, ARGV[1], tonumber(ARGV[4])}
end
local s = string.find(m, '|', 1, true)
local era = s and tonumber(string.sub(m, s + 1))
if not era or r[2] then
  return {2, string.sub(m, 1, (s or #m + 1) - 1), redis.call('PTTL', KEYS[4])}
end
if v then
  local i = string.find(v, '|', 1, true)
  local j = i and string.find(v, '|', i + 1, true)
  if j and string.sub(v, 1, i - 1) == ARGV[1] then
    return {1, tonumber(string.sub(v, i + 1, j - 1)), era}
  end
  local owner = ''
  if j then owner = string.sub(v, j + 1) end
  if ARGV[6] and not redis.call('ZSCORE', KEYS[5], ARGV[5]) then
    redis.call('ZADD', KEYS[5], ARGV[7], ARGV[5])
    redis.call('PEXPIRE', KEYS[5], string.format('%d', 2 * tonumber(ARGV[2])))
  end
  return {0, 0, owner, redis.call('PTTL', KEYS[1]), era, redis.sha1hex(i and string.sub(v, 1, i - 1) or v)}
end
if era > 0 and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SET', KEYS[2], string.format('%d', era * 1099511627776))
end
local f = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. string.format('%d', f) .. '|' .. ARGV[3], 'PX', ARGV[2])
if ARGV[6] == 'a' then
  redis.call('ZADD', KEYS[5], ARGV[8], ARGV[5])
  redis.call('PEXPIRE', KEYS[5], string.format('%d', 2 * tonumber(ARGV[2])))
elseif ARGV[6] then
  redis.call('ZREM', KEYS[5], ARGV[5])
end
if era == 0 then return f end
return {1, f, era}
`)

// raiseScript is phase 2 of an acquisition on one node: raise the node's fence
// counter to at least the acquisition's fence and, when the node's lock holds the
// acquisition's token, record that fence in the lock's value (keeping its time to
// live). Raising a counter is always safe: counters only have to be at least every
// fence issued, so the raise runs whether or not the lock is ours. It also lifts the
// node's era to the fence's era part, so that a node that comes back empty later is
// given an era above it. A node that has no era (it lost its data since phase 1, or
// waits for its era) is left alone: its counters must start at its era.
//
// KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] the node's marker; ARGV[1] token,
// ARGV[2] fence. Returns 1 when the lock holds ARGV[1] (so the counter is now >=
// ARGV[2] on a node this acquisition holds), 0 otherwise.
var raiseScript = redis.NewScript(`
local m = redis.call('GET', KEYS[3])
local s = m and string.find(m, '|', 1, true)
local era = s and tonumber(string.sub(m, s + 1))
if not era then return 0 end
local f = tonumber(ARGV[2])
local c = tonumber(redis.call('GET', KEYS[2]) or string.format('%d', era * 1099511627776))
if c < f then
  redis.call('SET', KEYS[2], ARGV[2])
end
local fe = math.floor(f / 1099511627776)
if fe > era then
  redis.call('SET', KEYS[3], string.sub(m, 1, s) .. string.format('%d', fe))
end
local v = redis.call('GET', KEYS[1])
if v then
  local i = string.find(v, '|', 1, true)
  local j = i and string.find(v, '|', i + 1, true)
  if j and string.sub(v, 1, i - 1) == ARGV[1] then
    local p = redis.call('PTTL', KEYS[1])
    if p > 0 then
      redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2] .. '|' .. string.sub(v, j + 1), 'PX', p)
    end
    return 1
  end
end
return 0
`)

// inspectScript reads a node's lock.
//
// KEYS[1] lock key. Returns nil when the lock is free, else {token, fence, owner,
// pttl}. The token is used only to tell holders apart; Inspect never reports it.
var inspectScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local i = string.find(v, '|', 1, true)
local j = i and string.find(v, '|', i + 1, true)
if not j then return {v, '0', '', redis.call('PTTL', KEYS[1])} end
return {string.sub(v, 1, i - 1), string.sub(v, i + 1, j - 1), string.sub(v, j + 1), redis.call('PTTL', KEYS[1])}
`)

// releaseScript deletes the lock when ARGV[1] still owns it and announces the release
// on the key's channel with the SHA-1 (hex) of the token: a Wait wakes only on the
// release of a lock it (or its Locker's last attempt) saw held, not on the clean-up
// of another waiter's failed attempt. The digest, not the token, is published: the
// token is what Unlock and Renew check.
//
// The clean-up of an attempt that found the key held by others, made by a Locker
// that waits on the key, passes the key's turns, the Locker's ID and the attempt's
// score and ttl too: the Locker joins the key's turns on the nodes it locked, as
// acquireScript made it join them on the nodes where it found the key held, so that
// every node names the same Locker next (see turns.go).
//
// KEYS[1] lock key, KEYS[2] (optional) the key's turns; ARGV[1] token, ARGV[2]
// release channel, ARGV[3], ARGV[4] and ARGV[5] (optional) the Locker's ID, its
// score and the ttl in ms. Returns 1 when it deleted the lock, 0 when the token did
// not own it.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], redis.sha1hex(ARGV[1]))
  if ARGV[3] and not redis.call('ZSCORE', KEYS[2], ARGV[3]) then
    redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
    redis.call('PEXPIRE', KEYS[2], string.format('%d', 2 * tonumber(ARGV[5])))
  end
  return 1
end
return 0
`)

// releaseTurnScript is Unlock's releaseScript: it also hands the key's next turn
// (see turns.go) to the first Locker of the key's turns, which it removes from
// them, and announces it with the release: "<digest>|<Locker ID>" ("<digest>|" when
// nobody has a turn). The message goes to the turn channels ("<channel>|<Locker
// ID>") of that Locker and of the one after it in the turns (which then knows that
// the turn went by it), and to the key's channel only when nobody has a turn or one
// of those two turn channels has no subscriber: the other Lockers in the turns wait
// for their own turn, and a message to each of them, on every node, would cost
// every release a read and a wake-up in every waiting Locker (see turns.go). It
// takes the first Locker out of the turns on every node
// Unlock reaches, also where the token does not own the lock (the lease's attempt
// did not lock that node, or another attempt locked it since), without a message
// there, so that the nodes' turns stay in step. First, when ARGV[3] is not empty
// (the releasing Locker has no waiters on the key), it removes ARGV[3] from the
// turns: a turn that a TryLock of the Locker took on a node where it found the key
// held, and then acquired the key on others, would wake nobody.
//
// KEYS[1] lock key, KEYS[2] the key's turns; ARGV[1] token, ARGV[2] release
// channel, ARGV[3] the Locker's ID or empty. Returns 1 when it deleted the lock, 0
// when the token did not own it.
var releaseTurnScript = redis.NewScript(`
local next, after = '', ''
if redis.call('EXISTS', KEYS[2]) == 1 then
  if ARGV[3] ~= '' then
    redis.call('ZREM', KEYS[2], ARGV[3])
  end
  local first = redis.call('ZRANGE', KEYS[2], 0, 1)
  next, after = first[1] or '', first[2] or ''
  if next ~= '' then
    redis.call('ZREM', KEYS[2], next)
  end
end
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  redis.call('DEL', KEYS[1])
  local msg = redis.sha1hex(ARGV[1]) .. '|' .. next
  local heard = next ~= '' and redis.call('PUBLISH', ARGV[2] .. '|' .. next, msg) > 0
  if heard and after ~= '' then
    heard = redis.call('PUBLISH', ARGV[2] .. '|' .. after, msg) > 0
  end
  if not heard then
    redis.call('PUBLISH', ARGV[2], msg)
  end
  return 1
end
return 0
`)

// waitScript reads a node's lock for Wait. When the lock is held, it also adds the
// waiting Locker to the key's turns unless it is there already (see turns.go), as
// acquireScript does for a TryLock of a Locker that waits: a Locker whose TryLock
// found the key held before its Waits subscribed to the key's channels is then in
// the turns too, and is named by a release in its turn. The turns then expire no
// sooner than twice the lock's time to live.
//
// KEYS[1] lock key, KEYS[2] the key's turns; ARGV[1] the Locker's ID and ARGV[2]
// its score (Locker.turnScore), both absent when the Locker is not to join. Returns nil when the lock is free, else {digest, pttl},
// digest being the SHA-1 (hex) of the holder's token.
var waitScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local i = string.find(v, '|', 1, true)
local p = redis.call('PTTL', KEYS[1])
if p > 0 and ARGV[1] and not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  if redis.call('PTTL', KEYS[2]) < 2 * p then
    redis.call('PEXPIRE', KEYS[2], string.format('%d', 2 * p))
  end
end
return {redis.sha1hex(i and string.sub(v, 1, i - 1) or v), p}
`)
