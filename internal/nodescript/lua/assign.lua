-- Provisioning, step 3: give a node its id (the rank of its uuid in the
-- roster), only if it still holds that uuid and that roster, and record the
-- replication id it serves under.
--
--   KEYS[1] uuid   KEYS[2] roster   KEYS[3] id marker
--   KEYS[4] recorded replication id   KEYS[5] lost stamp
--   ARGV[1] uuid   ARGV[2] roster   ARGV[3] id
--
-- Returns the node's id, or -1 if its uuid or roster changed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return -1
end
local id = redis.call('GET', KEYS[3])
if id then return tonumber(id) end
local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[4], replid)
redis.call('DEL', KEYS[5])
return tonumber(ARGV[3])
