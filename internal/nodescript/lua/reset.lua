-- Reprovisioning after a majority lost its data: forget the node's
-- identity, so that Provision can give the deployment a new roster, but keep
-- its counter, raised above every token the stores may have accepted.
--
--   KEYS[1] uuid   KEYS[2] roster   KEYS[3] id marker
--   KEYS[4] recorded replication id   KEYS[5] lost stamp
--   KEYS[6] G   KEYS[7] E
--   ARGV[1] the floor counter f   ARGV[2] R in ms
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
local f = tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[6]) or '0') < f then redis.call('SET', KEYS[6], f) end
local e = math.max(f, tonumber(redis.call('GET', KEYS[7]) or '0'))
redis.call('SET', KEYS[7], e, 'PX', ARGV[2])
return 1
