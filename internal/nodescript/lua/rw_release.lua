-- Release of a read-write lock, either side (release.lua runs unchanged as
-- releaseOne on the writer's keys). A reader leaves its own entry; the
-- last live reader to leave hands the lock to the first queued writer, as a
-- writer's Unlock does. A writer's release, and a rollback that finds no
-- entry of this value, are release.lua's, release marker included.
--
--   KEYS[1..5] the writer's key, release marker, NEXT, QUEUE, SEEN
--   KEYS[6] READERS
--   ARGV: release.lua's
local was = redis.pcall('ZREM', KEYS[6], ARGV[1])
if was == 1 then
  -- A reader that waited as a writer (then downgraded) leaves the queue
  -- here too, whatever other readers remain.
  if ARGV[3] == '1' and ARGV[4] ~= '' then
    redis.call('ZREM', KEYS[4], ARGV[4])
    redis.call('ZREM', KEYS[5], ARGV[4])
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
  if redis.call('ZCARD', KEYS[6]) == 0 then
    releaseOne({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]}, {ARGV[1], '0', ARGV[3], ARGV[4], ARGV[5]})
  end
  return 1
end
return releaseOne({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]}, ARGV)
