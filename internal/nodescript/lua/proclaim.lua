-- Proclaim (election.go): publish a leader's value, only where it holds
-- the election's lock. The value is a hash beside the lock key: the
-- leader's id (the lock's value), the proclamation's number (1, 2, ... per
-- leadership, so that a late copy of an older one changes nothing) and
-- the value.
--
--   KEYS[1] the lock key   KEYS[2] the election's value key
--   ARGV[1] the leader's id   ARGV[2] the proclamation's number
--   ARGV[3] the value   ARGV[4] how long the value key lives, ms
--
-- Returns 1 published (or this or a later proclamation of this leader is
-- here: its lifetime is renewed), 0 not held here by this leader.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then return wrongType(KEYS[1]) end
if v ~= ARGV[1] then return 0 end
local have = redis.pcall('HMGET', KEYS[2], 'id', 'seq')
if type(have) == 'table' and have.err then
  return {err = 'WRONGTYPE key ' .. KEYS[2] .. ' holds a ' .. redis.call('TYPE', KEYS[2])['ok'] .. ', not a hash'}
end
if have[1] == ARGV[1] and tonumber(have[2]) >= tonumber(ARGV[2]) then
  -- This one again (the keep-alive's), or a late copy of an older one:
  -- keep what is here, for another lifetime.
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 1
end
redis.call('HSET', KEYS[2], 'id', ARGV[1], 'seq', ARGV[2], 'value', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
-- Observers (Election.Observe) hear of a new leader or value at once: the
-- payload matches no waiter, so no candidate is woken by it.
redis.pcall('PUBLISH', KEYS[1] .. ':released', '~leader')
return 1
