-- Provisioning, step 2: record the roster (the sorted uuids of every node)
-- on a node that still holds the uuid the provisioner read from it. The
-- first roster wins: a provisioner that read a different set of uuids (one
-- node lost its data meanwhile) finds another roster and stops.
--
--   KEYS[1] uuid   KEYS[2] roster
--   ARGV[1] the uuid read from this node   ARGV[2] the roster
--
-- Returns the roster the node holds ('' if its uuid changed).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return '' end
redis.call('SET', KEYS[2], ARGV[2], 'NX')
return redis.call('GET', KEYS[2])
