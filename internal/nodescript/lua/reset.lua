-- Reprovisioning after a majority lost its data, on one node: a transition
-- from the state the reprovisioner read, once it had waited out the
-- delayed restart, to the new roster. Like repair.lua, it applies only
-- while the node still holds what was read: a node that lost its data
-- again since (its uuid, id or stamp went with it) or was repaired since
-- is left untouched, so that it cannot count again before its own delay.
-- One script, so the node never counts with its old counters or no stamp.
--
--   KEYS[1] uuid   KEYS[2] roster   KEYS[3] id marker
--   KEYS[4] recorded replication id   KEYS[5] lost stamp
--   KEYS[6] G   KEYS[7] E   KEYS[8] longest TTL used
--   ARGV[1] the floor counter f   ARGV[2] R in ms
--   ARGV[3] the uuid read ('' for none)   ARGV[4] the id read ('' for none)
--   ARGV[5] the lost stamp read ('' for none)
--   ARGV[6] the new uuid   ARGV[7] the new roster   ARGV[8] the new id
--   ARGV[9] the longest TTL in use, ms
--   ARGV[10] '1' if the node was read intact, '0' if it was read stamped
--
-- Returns 1, or 2 (nothing written) if the node changed since it was read.
local function get(k) return redis.call('GET', k) or '' end
if get(KEYS[1]) ~= ARGV[3] or get(KEYS[3]) ~= ARGV[4] or get(KEYS[5]) ~= ARGV[5] then
  return 2
end
-- A node restored from a snapshot, or a replica promoted, since the read
-- keeps its uuid and id but serves under a new replication id, and may
-- have lost lock keys: as repair.lua, the node must still serve under the
-- replication id its id was recorded with (or its stamp was made under).
local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
local recorded = get(KEYS[4])
if ARGV[10] == '1' then
  if recorded ~= '' and recorded ~= replid then return 2 end
elseif string.sub(ARGV[5], -string.len(replid) - 1) ~= ':' .. replid then
  return 2
end
local f = tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[6]) or '0') < f then redis.call('SET', KEYS[6], f) end
local e = math.max(f, tonumber(redis.call('GET', KEYS[7]) or '0'))
redis.call('SET', KEYS[7], e, 'PX', ARGV[2])
if tonumber(redis.call('GET', KEYS[8]) or '0') < tonumber(ARGV[9]) then
  redis.call('SET', KEYS[8], ARGV[9])
end
redis.call('SET', KEYS[1], ARGV[6])
redis.call('SET', KEYS[2], ARGV[7])
redis.call('SET', KEYS[3], ARGV[8])
redis.call('SET', KEYS[4], replid)
redis.call('DEL', KEYS[5])
return 1
