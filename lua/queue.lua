-- The waiting line shared by the acquisition scripts (queueLua in
-- queue.go). The script that includes it sets NEXT, QUEUE, SEEN and WAITER
-- first, and passes STALE and WAITED (ms) as ARGV[4] and ARGV[5]: they are
-- converted only when a waiter joins, as every conversion at the top of a
-- script is paid by every call (a sixth of an uncontended acquisition).
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function promisedToOther()
  local n = redis.call('GET', NEXT)
  return n and n ~= WAITER
end
local function enqueue()
  if WAITER == '' then return end
  local stale, waited = tonumber(ARGV[4]), math.max(0, tonumber(ARGV[5]) or 0)
  local now = nowMs()
  local place = now - waited
  local had = redis.call('ZSCORE', QUEUE, WAITER)
  if not had or tonumber(had) > place then redis.call('ZADD', QUEUE, place, WAITER) end
  redis.call('ZADD', SEEN, now, WAITER)
  redis.call('PEXPIRE', QUEUE, 4 * stale)
  redis.call('PEXPIRE', SEEN, 4 * stale)
end
