-- Round 1 of a fenced multi-lock: every member or none (multi_take.lua), and
-- one token candidate for the set, above the committed token H of every
-- member.
--
--   KEYS[1] G, the node's counter
--   KEYS[2..5] the node's id marker, recorded replication id, lost stamp,
--              roster
--   KEYS[6] the longest TTL used on this node (read by Repair)
--   KEYS[MEMBERS..] per member: lock key, release marker of this value,
--             promise NEXT, H of the name, and for a multi-lock its QUEUE
--             (MEMBERS is 7 for a multi-lock, STRIDE 5; a semaphore's keys
--             come before its members, STRIDE 4)
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] the deployment's roster
--
-- takeSet is takeAll(MEMBERS, STRIDE) for a multi-lock, marking the
-- queues of a refused set (watch.lua); a semaphore's checks its size and
-- its line first (sem_take.lua).
--
-- Returns {status, candidate} as lua/fenced_acquire.lua does. The candidate
-- is minted from the node's one counter G whatever the outcome, so it
-- exceeds every token this node has proposed or committed for any name.
local id = nodeID()
if not id then
  if redis.call('EXISTS', ROSTERKEY) == 0 then return {-2, 0} end
  return {-1, 0}
end
if (redis.call('GET', ROSTERKEY) or '') ~= ROSTER then return {-3, 0} end
local ok = takeSet()
if type(ok) == 'table' then return ok end
local g = redis.call('INCR', KEYS[1])
local c = g
for k = MEMBERS, #KEYS, STRIDE do
  local h = getString(KEYS[k + 3])
  if h then
    local f = math.floor(tonumber(h) / 256)
    if c <= f then c = f + 1 end
  end
end
if c ~= g then redis.call('SET', KEYS[1], c) end
if tonumber(redis.call('GET', KEYS[6]) or '0') < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[6], ARGV[2])
end
return {ok, c * 256 + id}
