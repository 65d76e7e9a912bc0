-- Provisioning, step 1: a node that holds no identity claims a uuid. The
-- first claim wins, so concurrent provisioners converge on one uuid per
-- node.
--
--   KEYS[1] uuid   KEYS[2] roster   KEYS[3] id marker
--   ARGV[1] a fresh uuid
--
-- Returns the uuid the node holds.
if redis.call('EXISTS', KEYS[2], KEYS[3]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'NX')
end
return redis.call('GET', KEYS[1]) or ''
