-- Unlock and rollback (releaseScript in release.go).
local NEXT, QUEUE, SEEN = KEYS[3], KEYS[4], KEYS[5]
local v = redis.pcall('GET', KEYS[1])
local deleted = 0
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  deleted = 1
elseif ARGV[2] ~= '0' then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
end
if ARGV[3] ~= '1' then return deleted end
-- Unlock: the holder leaves the queue on every node, and every node where
-- the lock is now free promises it to its first waiter.
if ARGV[4] ~= '' then
  redis.call('ZREM', QUEUE, ARGV[4])
  redis.call('ZREM', SEEN, ARGV[4])
end
if deleted == 0 and v then return 0 end
-- Nobody waits here and nothing is promised: nothing to hand over.
if redis.call('EXISTS', QUEUE, NEXT) == 0 then return deleted end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local next, live = '', 0
for _ = 1, 16 do
  local first = redis.call('ZRANGE', QUEUE, 0, 0)
  if #first == 0 then break end
  -- SEEN: until when the waiter counts as live, set by its own client.
  live = tonumber(redis.call('ZSCORE', SEEN, first[1]) or '0')
  if now <= live then
    next = first[1]
    break
  end
  redis.call('ZREM', QUEUE, first[1])
  redis.call('ZREM', SEEN, first[1])
end
if next == '' then
  redis.call('DEL', NEXT)
  redis.pcall('PUBLISH', KEYS[1] .. ':released', '')
  return deleted
end
redis.call('SET', NEXT, next, 'PX', ARGV[5])
-- A live waiter takes its promise, or is refused elsewhere and joins again,
-- which renews its liveness. One that does neither has died or stopped
-- listening: it counts as live no longer than the promise, so that a dead
-- waiter on long retry delays costs one promise period, not one a release.
local promised = now + tonumber(ARGV[5])
if live > promised then redis.call('ZADD', SEEN, promised, next) end
-- Only the promised waiter needs to wake, and only its client listens on
-- its own channel: telling every client cost each of them a read per node.
local client = string.match(next, '^(.*)/')
if client then
  redis.pcall('PUBLISH', KEYS[1] .. ':promised:' .. client, next)
else
  redis.pcall('PUBLISH', KEYS[1] .. ':released', next)
end
return deleted
