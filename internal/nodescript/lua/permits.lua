-- Prelude of a semaphore slot's acquisition (semaphore.go): the semaphore's
-- size K is stored on the node, beside its slots, and checked first. A
-- client built with another K is refused with an error, 'PERMITS <stored>
-- stored, not <K>', and nothing is written; otherwise K is stored again for
-- its lifetime (the retention, and at least two of the lease's TTLs; never
-- shortened), so that it outlives every lease of the semaphore
-- (slot_extend.lua renews it too) and a semaphore nobody uses leaves
-- nothing behind.
--
--   KEYS[#KEYS] the semaphore's size key
--   ARGV[#ARGV - 2] K   ARGV[#ARGV - 1] the slot   ARGV[#ARGV] its lifetime in ms
do
  local pk, k = KEYS[#KEYS], ARGV[#ARGV - 2]
  local have = redis.pcall('GET', pk)
  if type(have) == 'table' and have.err then return wrongType(pk) end
  if have and have ~= k then
    return redis.error_reply('PERMITS ' .. have .. ' stored, not ' .. k)
  end
  if redis.call('PTTL', pk) < tonumber(ARGV[#ARGV]) then
    redis.call('SET', pk, k, 'PX', ARGV[#ARGV])
  end
end
