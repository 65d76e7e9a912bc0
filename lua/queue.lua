-- The waiting line shared by the acquisition scripts (queueLua in
-- queue.go). The script that includes it sets NEXT, QUEUE, SEEN and WAITER
-- first, and passes STALE (ms) and WAITED (us) as ARGV[4] and ARGV[5]: they are
-- converted only when a waiter joins, as every conversion at the top of a
-- script is paid by every call (a sixth of an uncontended acquisition).
local function promisedToOther()
  local n = redis.call('GET', NEXT)
  return n and n ~= WAITER
end
local function enqueue()
  if WAITER == '' then return end
  local stale, waited = tonumber(ARGV[4]), math.max(0, tonumber(ARGV[5]) or 0)
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- Places in microseconds: waiters of a busy lock join a millisecond or
  -- less apart, and in milliseconds their places tied or crossed the
  -- millisecond boundary differently on different nodes, so that releases
  -- split their promises between them.
  local place = us - waited
  local had = redis.call('ZSCORE', QUEUE, WAITER)
  if not had or tonumber(had) > place then redis.call('ZADD', QUEUE, place, WAITER) end
  redis.call('ZADD', SEEN, math.floor(us / 1000), WAITER)
  redis.call('PEXPIRE', QUEUE, 4 * stale)
  redis.call('PEXPIRE', SEEN, 4 * stale)
end
