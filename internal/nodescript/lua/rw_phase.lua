-- Prelude of the read-write lock's scripts: the phase-fair rule's state on
-- one node (docs/rwlock.md, Phase-fair). Reader phases and writer phases
-- alternate. RPHASE counts the writer holds granted here while readers
-- waited. A reader refused while a writer holds the lock registers in RWAIT
-- needing that hold to end (RPHASE); one refused while a writer is promised
-- the lock or waits for it needs the next hold to end (RPHASE + 1). Once
-- the hold it needs has ended (RPHASE has reached its need and no writer
-- holds the key: Unlock or expiry alike), the reader is admitted ahead of
-- the queued writers, and no writer is promised or granted the lock while
-- such a reader is live (RSEEN: until when, set by its own client at each
-- attempt while it waits, refused or granted short of a majority, as a
-- writer's liveness in the queue's SEEN).
--
-- The script including it sets RPHASE, RWAIT and RSEEN first. Nothing here
-- runs while nobody waits: an uncontended read touches none of these keys,
-- an uncontended write one EXISTS.

local function phaseNow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- phaseKeyClash returns the first of the three keys that holds another type
-- than this prelude keeps there (a clash with a key of the application's),
-- else nil. An acquisition refuses with an error naming it; a release or a
-- downgrade leaves the rule out and still releases, so that a clash cannot
-- strand a hold until its TTL.
local function phaseKeyClash()
  local keys, want = {RPHASE, RWAIT, RSEEN}, {'string', 'zset', 'zset'}
  for i = 1, 3 do
    local t = redis.call('TYPE', keys[i])['ok']
    if t ~= 'none' and t ~= want[i] then return keys[i] end
  end
  return nil
end

-- admittedReaders reports whether a live reader waits whose writer hold
-- has been granted (the caller knows that no writer holds the key now).
-- It first drops up to 64 readers whose liveness has lapsed (a reader that
-- gave up without leaving, or died); more than that stay counted, which
-- only refuses a writer until later calls drop them.
local function admittedReaders(now)
  if redis.call('EXISTS', RWAIT) == 0 or phaseKeyClash() then return false end
  now = now or phaseNow() -- nil: the caller has not needed the time
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', RSEEN, '-inf', '(' .. now, 'LIMIT', 0, 64)) do
    redis.call('ZREM', RWAIT, m)
    redis.call('ZREM', RSEEN, m)
  end
  local phase = redis.call('GET', RPHASE) or '0'
  return #redis.call('ZRANGEBYSCORE', RWAIT, '-inf', phase, 'LIMIT', 0, 1) > 0
end

-- admitted reports whether reader waiter's writer hold has been granted
-- (the caller knows that no writer holds or is promised the key now).
local function admitted(waiter)
  if waiter == '' then return false end
  local need = redis.call('ZSCORE', RWAIT, waiter)
  return need and tonumber(need) <= tonumber(redis.call('GET', RPHASE) or '0')
end

-- waitRead registers refused reader waiter (its need kept if it was
-- registered already) and renews its liveness by stale ms. held: a writer
-- holds the key, and the reader needs that hold to end; otherwise the
-- next. The three keys live four times as long as the longest-lived
-- reader, and always together, so that RPHASE never ends before the needs
-- in RWAIT (a reset RPHASE would put them all a phase later).
local function waitRead(waiter, now, stale, held)
  if waiter == '' then return end
  redis.call('SET', RPHASE, '0', 'NX')
  local need = tonumber(redis.call('GET', RPHASE))
  if not held then need = need + 1 end
  redis.call('ZADD', RWAIT, 'NX', need, waiter)
  redis.call('ZADD', RSEEN, now + tonumber(stale), waiter)
  local last = redis.call('ZRANGE', RSEEN, -1, -1, 'WITHSCORES')
  local life = math.max(1, 4 * (tonumber(last[2]) - now))
  redis.call('PEXPIRE', RPHASE, life)
  redis.call('PEXPIRE', RWAIT, life)
  redis.call('PEXPIRE', RSEEN, life)
end

-- leaveRead takes reader waiter out of the readers' wait.
-- It reports whether waiter was waiting here. (pcall: a clash must not
-- stop the release around it.)
local function leaveRead(waiter)
  if waiter == '' then return false end
  local was = redis.pcall('ZREM', RWAIT, waiter)
  redis.pcall('ZREM', RSEEN, waiter)
  return was == 1
end

-- nextPhase counts a writer hold while readers wait: one granted here, or
-- one that ended without having been here (its Unlock found no key).
local function nextPhase()
  if redis.call('EXISTS', RWAIT) == 0 then return end
  if redis.call('INCR', RPHASE) == 1 or redis.call('PTTL', RPHASE) < 0 then
    redis.call('PEXPIRE', RPHASE, math.max(1, redis.call('PTTL', RWAIT)))
  end
end
