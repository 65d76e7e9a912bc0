-- Round 1 of an unfenced acquisition (acquireScript in attempt.go), after
-- the queue prelude.
if redis.call('EXISTS', KEYS[2], NEXT) == 0 then
  -- Neither released here nor promised to anyone, the common case: the SET
  -- alone decides (one call, not three, before it).
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
else
  if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
  if promisedToOther() then
    enqueue()
    -- 2: the lock is free here but promised to another waiter (see yield).
    if redis.call('EXISTS', KEYS[1]) == 0 then return 2 end
    return 0
  end
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
end
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
  -- Named as the fenced scripts name it (wrong_type.lua).
  return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. redis.call('TYPE', KEYS[1])['ok'] ..
    ', not a string')
end
if v == ARGV[1] then return 1 end
enqueue()
return 0
