-- Repair, claim: replace the uuid a node holds, if it is still the one the
-- repairer read ('' for none). Repair claims the roster's orphaned uuid this
-- way, and gives it back the same way if another node turned out to hold it.
--
--   KEYS[1] uuid   KEYS[2] id marker   KEYS[3] lost stamp
--   ARGV[1] the uuid read ('' for none)   ARGV[2] the new uuid ('' to drop)
--   ARGV[3] the lost stamp the repairer read
--
-- Like the repair itself, it applies only while the node holds the stamp
-- the repairer read, made under the replication id it serves under now
-- (repair.lua says why).
--
-- Returns the uuid the node holds afterwards.
if redis.call('EXISTS', KEYS[2]) == 1 then return redis.call('GET', KEYS[1]) or '' end
local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
if redis.call('GET', KEYS[3]) == ARGV[3] and string.sub(ARGV[3], -string.len(replid) - 1) == ':' .. replid
    and (redis.call('GET', KEYS[1]) or '') == ARGV[1] then
  if ARGV[2] == '' then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], ARGV[2])
  end
end
return redis.call('GET', KEYS[1]) or ''
