-- SetPermits' write: store the semaphore's size (K, version) for R, unless
-- the node holds a later one (another SetPermits) or the same version with
-- another K (a concurrent SetPermits that read the same version and wrote
-- here first). Run after a read of the versions on a majority, with the
-- highest version read plus one.
--
--   KEYS[1] the semaphore's size key   ARGV[1] K   ARGV[2] R in ms
--   ARGV[3] the version
-- Returns {1 stored or 0 refused, K found, version found} (0 0: none).
local have = redis.pcall('GET', KEYS[1])
if type(have) == 'table' and have.err then return wrongType(KEYS[1]) end
local k, v = tonumber(ARGV[1]), tonumber(ARGV[3])
local hk, hv = parseSize(have)
if have and (hv > v or (hv == v and hk ~= k)) then
  return {0, hk, hv}
end
redis.call('SET', KEYS[1], encodeSize(k, v), 'PX', ARGV[2])
return {1, hk or 0, hv or 0}
