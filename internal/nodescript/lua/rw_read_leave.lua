-- A waiting reader gives up (RWReadLeave): it leaves the readers' line,
-- and the writers that came after it, which it held back, are told.
--
--   KEYS[1] the writer's key   KEYS[2..3] the readers' line, RQ and RS
--   ARGV[1] the reader's waiter id
local had = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if had == 1 then redis.pcall('PUBLISH', KEYS[1] .. ':released', '') end
return 1
