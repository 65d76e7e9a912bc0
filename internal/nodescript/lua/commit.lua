-- Round 2 of a fenced acquisition: commit token T for this lock name.
--
--   KEYS[1] H, the highest token committed for the name (expires R after
--           its last commit)
--   KEYS[2] G, the node's counter      KEYS[3] E, the repair floor
--   KEYS[4..6] the node's id marker, recorded replication id, lost stamp
--   ARGV[1] T                          ARGV[2] R in ms
--   ARGV[3] the lock's value (a nonce, should the node need stamping)
--   KEYS[7] roster   ARGV[4] the deployment's roster, as the client found it
--
-- Returns {status, id}: the node's id (ID, set by the identity prelude,
-- which has already returned {-1, 0} if the node's fencing state is not
-- intact), and status -3 if the node holds another roster (not the node the
-- client checked). Otherwise status is the
-- effective H, max(H, E*256), H counting 0 once expired. If that exceeds T, someone
-- committed a newer token (or the node was repaired above T) and the client
-- aborts. If not, H becomes T for another R, G is raised to T's counter, and
-- T is returned. Raising G here is what lets a name's H expire: the next
-- acquisition of any name on a majority still starts above T (M1).
if (redis.call('GET', KEYS[7]) or '') ~= ARGV[4] then return {-3, 0} end
local t = tonumber(ARGV[1])
-- A repaired node may still hold an old H (a promoted replica does, and so
-- does a node reprovisioned above it): E bounds it from below either way.
local eff = math.max(tonumber(getString(KEYS[1]) or '0'),
  tonumber(redis.call('GET', KEYS[3]) or '0') * 256)
if eff > t then return {eff, ID} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local g = math.floor(t / 256)
if tonumber(redis.call('GET', KEYS[2]) or '0') < g then redis.call('SET', KEYS[2], g) end
return {t, ID}
