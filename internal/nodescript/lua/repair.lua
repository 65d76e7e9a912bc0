-- Repair, restore: raise the node's counter above every token a majority
-- may have committed, set the repair floor, and only then give the node back
-- its identity. One script, so the node never counts with low counters.
--
--   KEYS[1] uuid   KEYS[2] roster   KEYS[3] id marker
--   KEYS[4] recorded replication id   KEYS[5] lost stamp
--   KEYS[6] G   KEYS[7] E, the repair floor   KEYS[8] longest TTL used
--   ARGV[1] uuid   ARGV[2] roster   ARGV[3] id
--   ARGV[4] g, one above the highest G read from a majority
--   ARGV[5] R in ms   ARGV[6] longest TTL in ms
--   ARGV[7] the lost stamp the repairer read, and waited out
--
-- E = g for R: a name whose H is missing here (expired, or lost with the
-- data) counts as committed up to g*256, so a round 2 carrying a smaller
-- token aborts (docs/fencing.md, the repair trap).
--
-- The repair is a transition from the state the repairer read: it applies
-- only while the node holds the stamp the repairer waited out. A wipe since
-- (the stamp goes with the data, and the next script stamps anew) or a
-- repair completed since (it removed the stamp) makes it fail, so a
-- repairer paused between its read and this write cannot readmit the node
-- with the counters it read before.
--
-- Returns 1; 0 if the node no longer holds the uuid (it lost its data
-- again, or another repairer took it back); 2 if its stamp changed.
local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
-- The stamp must also be of the replication id the node serves under now:
-- a node restored from a snapshot, or a replica promoted, brings back the
-- stamp it had then, and has lost what happened since.
if redis.call('GET', KEYS[5]) ~= ARGV[7] or string.sub(ARGV[7], -string.len(replid) - 1) ~= ':' .. replid then
  return 2
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local id = redis.call('GET', KEYS[3])
if id and id ~= ARGV[3] then
  return redis.error_reply('ERR node holds id ' .. id .. ', not ' .. ARGV[3])
end
local g = tonumber(ARGV[4])
if tonumber(redis.call('GET', KEYS[6]) or '0') < g then redis.call('SET', KEYS[6], g) end
local e = math.max(g, tonumber(redis.call('GET', KEYS[7]) or '0'))
redis.call('SET', KEYS[7], e, 'PX', ARGV[5])
if tonumber(redis.call('GET', KEYS[8]) or '0') < tonumber(ARGV[6]) then
  redis.call('SET', KEYS[8], ARGV[6])
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[4], replid)
redis.call('DEL', KEYS[5])
return 1
