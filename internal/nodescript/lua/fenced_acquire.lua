-- Round 1 of a fenced acquisition: the unfenced acquisition plus a token
-- candidate minted by this node.
--
--   KEYS[1] lock key   KEYS[2] release marker of this value
--   KEYS[3] H of the name   KEYS[4] G, the node's counter
--   KEYS[5..8] the node's id marker, recorded replication id, lost stamp,
--              roster
--   KEYS[9] the longest TTL used on this node (read by Repair)
--   KEYS[10..12] the queue: promise NEXT, QUEUE, SEEN
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] waiter id (empty: none)
--   ARGV[4] STALE in ms   ARGV[5] WAITED in us (how long the waiter has waited)
--   ARGV[6] the deployment's roster, as the client found it at its check of
--           the node list (ROSTER)
--   Without a waiter (TryLock) only KEYS[1..10] are passed, and ARGV[4..5]
--   are not read.
--
-- Returns {status, candidate}: status 1 granted, 0 refused, 2 refused while
-- the lock is free here but promised to another waiter, -1 the node's
-- fencing state is not intact (see the identity prelude), -2 the node holds
-- no identity at all (never provisioned, or emptied), -3 the node holds
-- another roster than the client's: it is not the deployment's node that
-- the client checked, and nothing is written. The candidate is
-- c*256 + id with c = INCR G, raised above H's counter where H is still
-- there (round 2 keeps G above every H it commits, so that is a safety net).
local id = nodeID()
if not id then
  if redis.call('EXISTS', ROSTERKEY) == 0 then return {-2, 0} end
  return {-1, 0}
end
if (redis.call('GET', ROSTERKEY) or '') ~= ROSTER then return {-3, 0} end
-- Neither released here nor promised to anyone is the common case: one
-- call tells it, and the SET alone decides.
local blocked = redis.call('EXISTS', KEYS[2], NEXT) ~= 0
if blocked and redis.call('EXISTS', KEYS[2]) == 1 then return {0, 0} end
local ok = 0
if blocked and promisedToOther() then
  -- 2: the lock is free here but promised to another waiter (see yield).
  if redis.call('EXISTS', KEYS[1]) == 0 then ok = 2 end
elseif redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  ok = 1
else
  local v = redis.pcall('GET', KEYS[1])
  if type(v) == 'table' and v.err then
    return wrongType(KEYS[1])
  end
  if v == ARGV[1] then ok = 1 end
end
if ok ~= 1 then enqueue() end
local c = redis.call('INCR', KEYS[4])
local h = getString(KEYS[3])
if h then
  local f = math.floor(tonumber(h) / 256)
  if c <= f then
    c = f + 1
    redis.call('SET', KEYS[4], c)
  end
end
if tonumber(redis.call('GET', KEYS[9]) or '0') < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[9], ARGV[2])
end
return {ok, c * 256 + id}
