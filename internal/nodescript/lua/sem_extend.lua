-- Extend of a semaphore's permit of n slots: every slot or none, as
-- multi_extend.lua, and refused outright for a slot at or above the size
-- stored on the node, so that a SetPermits that shrank the semaphore drains
-- the slots above it within one TTL. Where it extends and the node stores
-- the holder's own size, it renews that for ARGV[3] (never shortening it);
-- it never stores one, and never renews another size (a node a SetPermits
-- missed must not be kept stale by the new size's holders).
--
--   KEYS[1] the semaphore's size key
--   fenced: KEYS[2] the node's id marker   KEYS[3] its longest TTL in use
--   KEYS[first..last] the slots' lock keys (first: 4 fenced, 2 not), then
--   (fenced) their H, in the same order, renewed for ARGV[3] as
--   lua/fenced_extend.lua renews a lock's
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] how long the size lives, ms
--   ARGV[4] 1 fenced, 0 not   ARGV[5] the holder's K
--   ARGV[6..] the slots, in the order of their keys
--
-- Returns 1 or 0; fenced, {1 or 0, the node's id, -1 for none}.
local fenced = ARGV[4] == '1'
local first = 2
if fenced then first = 4 end
local last = first + (#ARGV - 5) - 1
local held = 1
local size = redis.pcall('GET', KEYS[1])
if type(size) ~= 'string' then size = nil end
size = parseSize(size)
for k = first, last do
  local slot = tonumber(ARGV[6 + k - first])
  if (size and slot >= size) or redis.pcall('GET', KEYS[k]) ~= ARGV[1] then
    held = 0
    break
  end
end
if held == 1 then
  for k = first, last do redis.call('PEXPIRE', KEYS[k], ARGV[2]) end
  for k = last + 1, #KEYS do redis.call('PEXPIRE', KEYS[k], ARGV[3], 'GT') end
  if size == tonumber(ARGV[5]) and redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
  if fenced and tonumber(redis.call('GET', KEYS[3]) or '0') < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[3], ARGV[2])
  end
end
if not fenced then return held end
return {held, tonumber(redis.call('GET', KEYS[2]) or '-1')}
