-- Extend of a read-write lock, either side: the writer's key where it
-- still holds this value (extend.lua), else this reader's own entry where
-- it is still live, never another's and never the whole set's expiry
-- alone. It never re-creates an expired entry.
--
--   KEYS[1] the writer's key   KEYS[2] READERS
--   fenced: KEYS[3] the node's id marker   KEYS[4] its longest TTL in use
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] 1 fenced, 0 not
--
-- Returns 1 or 0; fenced, {1 or 0, the node's id, -1 for none}, the
-- longest TTL in use raised as fenced_extend.lua does.
local fenced = ARGV[3] == '1'
local held = 0
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  held = redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  local s = redis.pcall('ZSCORE', KEYS[2], ARGV[1])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if type(s) == 'string' and tonumber(s) > now then
    redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[2]), ARGV[1])
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', KEYS[2], math.max(1, tonumber(last[2]) - now))
    held = 1
  end
end
if not fenced then return held end
if held == 1 and tonumber(redis.call('GET', KEYS[4]) or '0') < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[4], ARGV[2])
end
return {held, tonumber(redis.call('GET', KEYS[3]) or '-1')}
