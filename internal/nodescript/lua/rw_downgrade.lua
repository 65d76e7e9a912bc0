-- Downgrade of a read-write lock's writer to a reader, in one step on the
-- node: the writer's key becomes a reader entry of the same value, expiring
-- when the key would have, so no other writer can come in between (Curator's
-- downgrade race) and the token stays the writer's. The holder leaves the
-- writers' queue, and a promise still naming it is withdrawn, as a release
-- does: a writer that waited for the lock must not keep new readers out once
-- it reads. Queued writers still block new readers, but the downgrade ends
-- the writer hold as an Unlock does: readers that waited for it are
-- admitted beside the holder, and woken (rw_phase.lua).
--
--   KEYS[1] the writer's key   KEYS[2] READERS
--   KEYS[3..5] the writers' queue: promise NEXT, QUEUE, SEEN
--   KEYS[6..8] RPHASE, RWAIT, RSEEN
--   ARGV[1] value   ARGV[2] the holder's waiter id ('' if it never waited)
-- Returns 1 if this node now holds the value as a reader, else 0, and a
-- WRONGTYPE error naming READERS, with nothing written, if that key holds
-- another type.
local s = redis.pcall('ZSCORE', KEYS[2], ARGV[1])
if type(s) == 'table' and s.err then return wrongType(KEYS[2]) end
if ARGV[2] ~= '' then
  redis.call('ZREM', KEYS[4], ARGV[2])
  redis.call('ZREM', KEYS[5], ARGV[2])
  if redis.call('GET', KEYS[3]) == ARGV[2] then redis.call('DEL', KEYS[3]) end
end
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then
  if type(s) == 'string' then return 1 end
  return 0
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[2], math.max(1, tonumber(last[2]) - now))
if admittedReaders(now) then redis.pcall('PUBLISH', KEYS[1] .. ':released', '') end
return 1
