-- Revoke (the root package's revoke.go): release the lock on this node if
-- it holds the value the revoker means, as its holder's Unlock would
-- (release.lua runs as releaseOne with that value): the lock is promised to
-- the first live waiter, or its release published. The holder's value
-- goes, so its Extend finds nothing to extend here; H stays, so the next
-- holder's token is above the revoked one's. Any other value is left
-- alone: a holder that took the node since the revoker read it is not the
-- one it revokes.
--
--   KEYS[1] the lock key   KEYS[2..4] the queue: NEXT, QUEUE, SEEN
--   ARGV[1] how long the promise to the next waiter lasts, ms
--   ARGV[2] the value to revoke ('' : none here)
--
-- Returns the value revoked, '' if it was not held here, and a WRONGTYPE
-- error naming the key if it holds another type.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then return wrongType(KEYS[1]) end
if not v or ARGV[2] == '' or v ~= ARGV[2] then return '' end
-- KEYS[1] stands in for the release marker: the value is found, so none is written.
releaseOne({KEYS[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, {v, '0', '1', '', ARGV[1]})
return v
