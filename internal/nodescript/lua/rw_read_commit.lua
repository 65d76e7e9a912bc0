-- Round 2 of a fenced read: commit token T for a reader. Readers do not
-- conflict with each other, so a reader aborts only when a writer committed
-- a newer token (H) or the node was repaired above T (E); the readers' mark
-- HR keeps the largest reader token, which a writer's commit must exceed
-- (rw_write_commit.lua).
--
--   KEYS[1] H   KEYS[2] HR   KEYS[3] G   KEYS[4] E
--   KEYS[5..7] id marker, replication id, lost stamp   KEYS[8] roster
--   ARGV[1] T   ARGV[2] R in ms   ARGV[3] the value (a nonce)
--   ARGV[4] the deployment's roster, as the client found it
--
-- Returns {status, id} as commit.lua does.
if (redis.call('GET', KEYS[8]) or '') ~= ARGV[4] then return {-3, 0} end
local t = tonumber(ARGV[1])
local eff = math.max(tonumber(getString(KEYS[1]) or '0'),
  tonumber(redis.call('GET', KEYS[4]) or '0') * 256)
if eff > t then return {eff, ID} end
local hr = tonumber(getString(KEYS[2]) or '0')
redis.call('SET', KEYS[2], math.max(hr, t), 'PX', ARGV[2])
local g = math.floor(t / 256)
if tonumber(redis.call('GET', KEYS[3]) or '0') < g then redis.call('SET', KEYS[3], g) end
return {t, ID}
