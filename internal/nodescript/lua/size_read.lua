-- A semaphore's size as one node stores it, read only (SetPermits' read,
-- Refresh).
--
--   KEYS[1] the semaphore's size key
-- Returns {K, version}, {0, 0} for none.
local have = redis.pcall('GET', KEYS[1])
if type(have) == 'table' and have.err then return wrongType(KEYS[1]) end
local k, v = parseSize(have)
return {k or 0, v or 0}
