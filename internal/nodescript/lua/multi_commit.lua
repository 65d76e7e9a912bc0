-- Round 2 of a fenced multi-lock: commit token T for every member at once.
--
--   KEYS[1] G   KEYS[2] E, the repair floor
--   KEYS[3..5] the node's id marker, recorded replication id, lost stamp
--   KEYS[6] roster
--   KEYS[7..] H of each member
--   ARGV[1] T   ARGV[2] R in ms   ARGV[3] the lock's value (a nonce)
--   ARGV[4] the deployment's roster, as the client found it
--
-- Returns {status, id} as lua/commit.lua does, status being the effective H
-- of the set: the largest of the members' H and E*256. If it exceeds T the
-- client aborts and nothing is written; otherwise every member's H becomes T
-- for another R and G is raised to T's counter, in one step, so T is
-- accepted by every member's fence and exceeds every earlier token of each.
if (redis.call('GET', KEYS[6]) or '') ~= ARGV[4] then return {-3, 0} end
local t = tonumber(ARGV[1])
local eff = tonumber(redis.call('GET', KEYS[2]) or '0') * 256
for k = 7, #KEYS do
  eff = math.max(eff, tonumber(getString(KEYS[k]) or '0'))
end
if eff > t then return {eff, ID} end
for k = 7, #KEYS do
  redis.call('SET', KEYS[k], ARGV[1], 'PX', ARGV[2])
end
local g = math.floor(t / 256)
if tonumber(redis.call('GET', KEYS[1]) or '0') < g then redis.call('SET', KEYS[1], g) end
return {t, ID}
