-- A reader that gave up waiting leaves the readers' wait (rw_phase.lua), so
-- that it holds back no writer for the rest of its liveness. If it was
-- the last reader admitted by a writer hold's end to go, and no reader
-- holds the lock, it hands the lock to the first queued writer, as the
-- last reader's Unlock would: else that writer would wait for its next
-- retry to notice.
--
--   KEYS[1] the writer's key   KEYS[2..4] the writers' queue: NEXT, QUEUE,
--   SEEN   KEYS[5] READERS   RPHASE, RWAIT, RSEEN: KEYS[6..8]
--   ARGV[1] the reader's waiter id   ARGV[2] how long a promise lasts, ms
local need = redis.pcall('ZSCORE', RWAIT, ARGV[1])
if not leaveRead(ARGV[1]) or phaseKeyClash() then return 1 end
if tonumber(need) > tonumber(redis.call('GET', RPHASE) or '0') then return 1 end
if redis.pcall('EXISTS', KEYS[1], KEYS[2]) ~= 0 then return 1 end -- held or promised
local now = phaseNow()
local purged = redis.pcall('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
if type(purged) ~= 'number' or redis.call('EXISTS', KEYS[5]) == 1 then return 1 end
if admittedReaders(now) then return 1 end
-- KEYS[1] as the release marker too: with no marker TTL, none is written.
releaseOne({KEYS[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, {'', '0', '1', '', ARGV[2]})
return 1
