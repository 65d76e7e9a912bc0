-- Extend of a semaphore slot: the mutex's extension (extend.lua,
-- fenced_extend.lua), refused for a slot at or above the size stored on the
-- node, so that a SetPermits that shrank the semaphore drains the slots
-- above it within one TTL. Where it extends and the node stores the
-- holder's own size, it renews that for ARGV[4] (never shortening it); it
-- never stores one, and never renews another size (a node a SetPermits
-- missed must not be kept stale by the new size's holders).
--
--   KEYS[1] slot key   KEYS[2] the semaphore's size key
--   fenced: KEYS[3] the node's id marker   KEYS[4] its longest TTL in use
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] the slot
--   ARGV[4] how long the size lives, in ms   ARGV[5] 1 fenced, 0 not
--   ARGV[6] the holder's size
--
-- Returns 1 or 0; fenced, {1 or 0, the node's id, -1 for none}.
local fenced = ARGV[5] == '1'
local held = 0
local size = redis.pcall('GET', KEYS[2])
if type(size) ~= 'string' or tonumber(ARGV[3]) < tonumber(size) then
  if redis.pcall('GET', KEYS[1]) == ARGV[1] then
    held = redis.call('PEXPIRE', KEYS[1], ARGV[2])
    if size == ARGV[6] and redis.call('PTTL', KEYS[2]) < tonumber(ARGV[4]) then
      redis.call('PEXPIRE', KEYS[2], ARGV[4])
    end
    if fenced and tonumber(redis.call('GET', KEYS[4]) or '0') < tonumber(ARGV[2]) then
      redis.call('SET', KEYS[4], ARGV[2])
    end
  end
end
if not fenced then return held end
return {held, tonumber(redis.call('GET', KEYS[3]) or '-1')}
