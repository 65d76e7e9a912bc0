-- Prelude of a semaphore's acquisitions (semaphore.go): the semaphore's
-- size K is stored on the node, beside its slots, and checked first.
-- checkPermits(pk, k, life) returns nil when the node stores K (or none),
-- and otherwise an error reply, 'PERMITS <stored> stored, not <K>', after
-- writing nothing. When it passes, K is stored again for its lifetime (the
-- retention, and at least two of the lease's TTLs; never shortened), so
-- that it outlives every lease of the semaphore (sem_extend.lua renews it
-- too) and a semaphore nobody uses leaves nothing behind.
--
--   pk the semaphore's size key   k the client's K   life ms
local function checkPermits(pk, k, life)
  local have = redis.pcall('GET', pk)
  if type(have) == 'table' and have.err then return wrongType(pk) end
  if have and have ~= k then
    return redis.error_reply('PERMITS ' .. have .. ' stored, not ' .. k)
  end
  if redis.call('PTTL', pk) < tonumber(life) then
    redis.call('SET', pk, k, 'PX', life)
  end
  return nil
end
