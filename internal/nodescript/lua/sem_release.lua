-- Release and rollback of a semaphore's permit of n slots: the mutex's
-- release (release.lua, as releaseOne) on each slot, then, for a release
-- that is announced (not a rollback), the line is told (sem_line.lua
-- wakeLine): the waiters at its head whose requests the free slots can now
-- serve.
--
--   KEYS[1] the line's QUEUE   KEYS[2] its SEEN
--   KEYS[3..2+K] the semaphore's K slot keys
--   KEYS[3+K..] per slot released: the five keys of Release
--   ARGV[1..5] Release's: value, marker TTL, announce, the holder's waiter
--              id in the line ('' if it did not wait), promise
--   ARGV[6] K   ARGV[7] the line key, which names its channels
--
-- Returns 1 if it deleted every slot, 0 if any held something else.
local k = tonumber(ARGV[6])
local all = 1
for i = 3 + k, #KEYS, 5 do
  if releaseOne({KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], KEYS[i + 4]}, ARGV) ~= 1 then all = 0 end
end
if ARGV[3] == '1' then
  -- The holder leaves the line on every node: one that refused it, where
  -- it joined, would count it ahead of others until its liveness lapsed.
  if ARGV[4] ~= '' then
    redis.call('ZREM', QUEUE, ARGV[4])
    redis.call('ZREM', SEEN, ARGV[4])
  end
  wakeLine(k, ARGV[7], ARGV[5])
end
return all
