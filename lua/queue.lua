-- The waiting line shared by the acquisition and release scripts (queueLua
-- in queue.go). The script that includes it sets NEXT, QUEUE, SEEN, WAITER,
-- STALE and WAITED first.
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
  local now = nowMs()
  local place = now - WAITED
  local had = redis.call('ZSCORE', QUEUE, WAITER)
  if not had or tonumber(had) > place then redis.call('ZADD', QUEUE, place, WAITER) end
  redis.call('ZADD', SEEN, now, WAITER)
  redis.call('PEXPIRE', QUEUE, 4 * STALE)
  redis.call('PEXPIRE', SEEN, 4 * STALE)
end
