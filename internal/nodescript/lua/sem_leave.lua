-- A waiter gives up its place in a semaphore's line (SemLeave), and the
-- waiters behind it that the free slots can now serve are told
-- (sem_line.lua wakeLine): it may have been all that held them back.
--
--   KEYS[1] the line's QUEUE   KEYS[2] its SEEN   KEYS[3..2+K] the K slot keys
--   ARGV[1] the waiter   ARGV[2] K   ARGV[3] the line key   ARGV[4] the promise, ms
local had = redis.call('ZREM', QUEUE, ARGV[1])
redis.call('ZREM', SEEN, ARGV[1])
if had == 1 then wakeLine(tonumber(ARGV[2]), ARGV[3], ARGV[4]) end
return 1
