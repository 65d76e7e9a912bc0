-- A reader that gave up waiting leaves the readers' wait (rw_phase.lua), so
-- that it holds back no writer for the rest of its liveness.
--
--   KEYS[1] RWAIT   KEYS[2] RSEEN   ARGV[1] the reader's waiter id
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
