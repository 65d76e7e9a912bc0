-- A read-write lock's read acquisition: a reader entry of its own, with its
-- own expiry, granted where no writer holds the lock and no live writer
-- that came before the reader waits in the queue or is promised the lock.
-- Readers and writers are served in arrival order: a reader behind a
-- queued writer waits (writers are not starved), and a writer behind a
-- waiting reader waits too (rw_write_block.lua: readers are not starved by
-- a stream of writers). A waiting reader that is refused joins the
-- readers' line (RQ, RS: places and liveness, as the writers' QUEUE and
-- SEEN); it is never promised the lock, only woken (watch.lua, and a
-- writer's release: rw_release.lua).
--
--   KEYS[1] the writer's key   KEYS[2] release marker of this value
--   KEYS[3..5] the writers' queue: promise NEXT, QUEUE, SEEN
--   KEYS[6] READERS (value -> expiry in ms, this node's clock)
--   KEYS[7] H, the writers' committed token
--   fenced: KEYS[8] G   KEYS[9..12] id marker, replication id, lost stamp,
--           roster   KEYS[13] the longest TTL used on this node
--   then RQ, RS, the readers' line (KEYS[8..9] unfenced, KEYS[14..15] fenced)
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] the roster ('' unfenced)
--   ARGV[4] STALE in ms (a waiter's liveness; the mark of watch.lua)
--   ARGV[5] WAITED in us   ARGV[6] the reader's waiter id ('': TryRLock)
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The reader's place: its own in the line, or where it would join.
local mine = math.huge
if WAITER ~= '' then
  mine = tonumber(redis.call('ZSCORE', RQ, WAITER) or
    (tonumber(t[1]) * 1000000 + tonumber(t[2]) - math.max(0, tonumber(ARGV[5]) or 0)))
end
local function refused()
  watch(KEYS[4], ARGV[4]) -- the writer's release wakes the waiting readers
  enqueueOn(RQ, RS)
  if FENCED then return {0, 0} end
  return 0
end
-- writerAhead: a live writer that came before the reader waits in the
-- queue (SEEN: until when it counts as live), or one is promised the lock
-- and came before it (a promise to a writer that is not in the queue
-- here counts as before).
local function writerAhead()
  local next = redis.call('GET', KEYS[3])
  if next then
    local at = redis.call('ZSCORE', KEYS[4], next)
    if not at or tonumber(at) < mine then return true end
  end
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. string.format('%.17g', mine), 'LIMIT', 0, 64)) do
    if tonumber(redis.call('ZSCORE', KEYS[5], w) or '0') >= now then return true end
  end
  return false
end
if redis.call('EXISTS', KEYS[2]) == 1 then return refused() end
local w = redis.pcall('GET', KEYS[1])
if type(w) == 'table' and w.err then return wrongType(KEYS[1]) end
if w then return refused() end
if writerAhead() then return refused() end
if WAITER ~= '' then
  redis.call('ZREM', RQ, WAITER)
  redis.call('ZREM', RS, WAITER)
end
local purged = redis.pcall('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
if type(purged) == 'table' and purged.err then return wrongType(KEYS[6]) end
redis.call('ZADD', KEYS[6], now + tonumber(ARGV[2]), ARGV[1])
-- The set lives as long as its longest-lived entry.
local last = redis.call('ZRANGE', KEYS[6], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[6], math.max(1, tonumber(last[2]) - now))
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
