-- Prelude of a semaphore slot's acquisition (semaphore.go): the semaphore's
-- size K is stored on the node, beside its slots, and checked first. A
-- client built with another K is refused with an error, 'PERMITS <stored>
-- stored, not <K>', and nothing is written; otherwise K is stored again for
-- R, so that it outlives every lease of the semaphore (slot_extend.lua
-- renews it too) and a semaphore nobody uses leaves nothing behind.
--
--   KEYS[#KEYS] the semaphore's size key
--   ARGV[#ARGV - 2] K   ARGV[#ARGV - 1] the slot   ARGV[#ARGV] R in ms
do
  local pk, k = KEYS[#KEYS], ARGV[#ARGV - 2]
  local have = redis.pcall('GET', pk)
  if type(have) == 'table' and have.err then return wrongType(pk) end
  if have and have ~= k then
    return redis.error_reply('PERMITS ' .. have .. ' stored, not ' .. k)
  end
  redis.call('SET', pk, k, 'PX', ARGV[#ARGV])
end
