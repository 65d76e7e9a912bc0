-- SetPermits: store the semaphore's size K for R.
--
--   KEYS[1] the semaphore's size key   ARGV[1] K   ARGV[2] R in ms
-- Returns the size it replaced, or 0 if none was stored.
local have = redis.pcall('GET', KEYS[1])
if type(have) == 'table' and have.err then return wrongType(KEYS[1]) end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return tonumber(have or '0')
