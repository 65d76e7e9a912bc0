-- Leader (election.go): what one node holds of an election, read only.
--
--   KEYS[1] the lock key   KEYS[2] the election's value key
--   fenced: KEYS[3] H of the lock name
--
-- Returns {lock value or '', its PTTL, H or '0', the value key's leader id
-- or '', its proclamation number or '0', its value or ''}.
local out = {}
lockAt(out, KEYS[1], KEYS[3])
local have = redis.pcall('HMGET', KEYS[2], 'id', 'seq', 'value')
if type(have) == 'table' and have.err then
  return redis.error_reply('WRONGTYPE key ' .. KEYS[2] .. ' holds a ' .. redis.call('TYPE', KEYS[2])['ok'] .. ', not a hash')
end
out[#out + 1] = have[1] or ''
out[#out + 1] = have[2] or '0'
out[#out + 1] = have[3] or ''
return out
