-- SemInspect: what one node holds of a semaphore, read only.
--
--   KEYS[1] the size key   KEYS[2] the line's SEEN
--   KEYS[3..] per slot: its lock key, then (fenced, ARGV[1] = 2) its H
--   ARGV[1] how many keys per slot: 1 or 2
--
-- Returns {K stored or 0, live waiters in the line, {per slot, three
-- entries as inspect.lua's reply}, the size's version}.
local k = redis.pcall('GET', KEYS[1])
if type(k) == 'table' and k.err then
  return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. redis.call('TYPE', KEYS[1])['ok'] .. ', not a string')
end
local stride = tonumber(ARGV[1])
local slots = {}
for i = 3, #KEYS, stride do
  lockAt(slots, KEYS[i], stride == 2 and KEYS[i + 1] or nil)
end
local size, version = parseSize(k)
return {size or 0, liveWaiters(KEYS[2], nowMs()), slots, version or 0}
