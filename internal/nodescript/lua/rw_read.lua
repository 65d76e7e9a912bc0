-- A read-write lock's read acquisition: a reader entry of its own, with its
-- own expiry, granted where no writer holds the lock, none is promised it,
-- and either no live writer waits in the queue or the writer hold this
-- reader waited for has ended (rw_phase.lua). Only
-- writers queue: a reader behind a queued writer waits, so writers are not
-- starved, and it waits for one writer phase at most, so readers are not.
--
--   KEYS[1] the writer's key   KEYS[2] release marker of this value
--   KEYS[3..5] the writers' queue: promise NEXT, QUEUE, SEEN
--   KEYS[6] READERS (value -> expiry in ms, this node's clock)
--   KEYS[7] H, the writers' committed token
--   fenced: KEYS[8] G   KEYS[9..12] id marker, replication id, lost stamp,
--           roster   KEYS[13] the longest TTL used on this node
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] the roster ('' unfenced)
--   ARGV[4] how long the mark of a refused reader lasts, ms (watch.lua),
--   and its liveness in RSEEN   ARGV[5] the reader's waiter id ('' for a
--   single attempt: it never waits)
--   RPHASE, RWAIT, RSEEN: rw_phase.lua's, after the keys above
--
-- Returns 1 granted or 0 refused; fenced, {status, candidate} as
-- fenced_acquire.lua (a refused node proposes no candidate).
local id
if FENCED then
  id = nodeID()
  if not id then
    if redis.call('EXISTS', ROSTERKEY) == 0 then return {-2, 0} end
    return {-1, 0}
  end
  if (redis.call('GET', ROSTERKEY) or '') ~= ROSTER then return {-3, 0} end
end
local function refused(now, held)
  watch(KEYS[4], KEYS[5], ARGV[4]) -- the writer's release wakes the waiting readers
  local clash = phaseKeyClash()
  if clash then return wrongType(clash) end
  waitRead(WAITER, now or phaseNow(), ARGV[4], held)
  if FENCED then return {0, 0} end
  return 0
end
-- No writer, no release marker, no promise is the common case: one call
-- tells it (the uncontended read lock costs the mutex's within 1.1x).
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) ~= 0 then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    -- A copy of a rolled-back attempt: it registers nothing.
    watch(KEYS[4], KEYS[5], ARGV[4])
    if FENCED then return {0, 0} end
    return 0
  end
  local w = redis.pcall('GET', KEYS[1])
  if type(w) == 'table' and w.err then return wrongType(KEYS[1]) end
  if w then return refused(nil, true) end
  if redis.call('EXISTS', KEYS[3]) == 1 then return refused(nil, false) end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A live queued writer ('~life' is the lifetime of the readers' own mark:
-- watch.lua).
local function writerQueued()
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], now, '+inf', 'LIMIT', 0, 2)) do
    if m ~= '~life' then return true end
  end
  return false
end
if writerQueued() then
  local clash = phaseKeyClash()
  if clash then return wrongType(clash) end
  if not admitted(WAITER) then return refused(now, false) end
end
-- A waiting reader granted here has not yet won a majority: its attempt may
-- still be rolled back and retried. It stays live in the wait, as at each
-- refusal, or its place would lapse where it is admitted (it is refused
-- nowhere here to renew it) and a queued writer would take the node ahead
-- of it (TestRWAdmittedReaderStaysLiveWhereItIsGranted).
if WAITER ~= '' and type(redis.pcall('ZSCORE', RWAIT, WAITER)) == 'string' and not phaseKeyClash() then
  waitRead(WAITER, now, ARGV[4], true)
end
local purged = redis.pcall('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
if type(purged) == 'table' and purged.err then return wrongType(KEYS[6]) end
-- NX: a copy of this call that lands late (a resend, a paused node) must
-- not reset an entry that an Extend has set since, as SET NX leaves a
-- mutex's key alone.
local added = redis.call('ZADD', KEYS[6], 'NX', now + tonumber(ARGV[2]), ARGV[1])
-- The set lives as long as its longest-lived entry: this one, if it is
-- alone (the uncontended read).
if added == 1 and redis.call('ZCARD', KEYS[6]) == 1 then
  redis.call('PEXPIRE', KEYS[6], math.max(1, tonumber(ARGV[2])))
else
  local last = redis.call('ZRANGE', KEYS[6], -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[6], math.max(1, tonumber(last[2]) - now))
end
if not FENCED then return 1 end
local c = redis.call('INCR', KEYS[8])
local h = getString(KEYS[7])
if h then
  local f = math.floor(tonumber(h) / 256)
  if c <= f then
    c = f + 1
    redis.call('SET', KEYS[8], c)
  end
end
if tonumber(redis.call('GET', KEYS[13]) or '0') < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[13], ARGV[2])
end
return {1, c * 256 + id}
