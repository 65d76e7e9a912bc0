-- RWInspect: what one node holds of a read-write lock, read only.
--
--   KEYS[1] the writer's key   KEYS[2] READERS   KEYS[3] the writers'
--   queue's SEEN   fenced: KEYS[4] H   KEYS[5] HR
--   ARGV[1] the most readers to list
--
-- Returns {writer value or '', its PTTL, H or '0', HR or '0', live writers
-- waiting, {reader, ms left, ...}}: the live readers, soonest to expire
-- last.
local now = nowMs()
local out = {}
lockAt(out, KEYS[1], KEYS[4])
local hr = '0'
if KEYS[5] then hr = readString(KEYS[5]) or '0' end
out[#out + 1] = hr
out[#out + 1] = liveWaiters(KEYS[3], now)
local readers = redis.pcall('ZRANGEBYSCORE', KEYS[2], now + 1, '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
if type(readers) == 'table' and readers.err then wrongTypeOf(KEYS[2], 'sorted set') end
local list = {}
for i = 1, #readers, 2 do
  list[#list + 1] = readers[i]
  list[#list + 1] = tonumber(readers[i + 1]) - now
end
out[#out + 1] = list
return out
