-- Prelude of a semaphore's acquisitions (semaphore.go): the semaphore's
-- size is stored on the node as (K, version), beside its slots, and
-- checked first (size.lua holds the format). checkPermits(pk, k, v, life)
-- returns nil when the acquisition may go on, and otherwise an error reply,
-- 'PERMITS <K> <version> stored, not <client's size>', after writing
-- nothing:
--   - no size stored: the client's is stored;
--   - the client's version is higher: the node adopts the client's size (a
--     node that missed a SetPermits, or restarted empty and was refilled
--     by a client that had not heard of it, is repaired here);
--   - otherwise the client's K must be the stored K (a client with an
--     older version and the same K is not wrong about anything).
-- When it passes, the size is kept for its lifetime (the retention, and at
-- least two of the lease's TTLs; never shortened), so that it outlives
-- every lease of the semaphore (sem_extend.lua renews it too) and a
-- semaphore nobody uses leaves nothing behind.
--
--   pk the semaphore's size key   k the client's K   v its version   life ms
local function checkPermits(pk, k, v, life)
  local have = redis.pcall('GET', pk)
  if type(have) == 'table' and have.err then return wrongType(pk) end
  k, v = tonumber(k), tonumber(v)
  local hk, hv = parseSize(have)
  if not have or v > hv then
    redis.call('SET', pk, encodeSize(k, v), 'PX', life)
    return nil
  end
  if hk ~= k then
    return redis.error_reply('PERMITS ' .. hk .. ' ' .. hv .. ' stored, not ' .. encodeSize(k, v))
  end
  if redis.call('PTTL', pk) < tonumber(life) then
    redis.call('PEXPIRE', pk, life)
  end
  return nil
end
