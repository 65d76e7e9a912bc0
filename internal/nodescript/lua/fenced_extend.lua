-- Extend of a fenced lock (extend.go): extend.lua, and the node's id with
-- the answer, so that an Extend counts each member of the deployment once,
-- however many addresses lead to it (an address swapped while the lock is
-- held). An extension may apply a longer TTL than any acquisition did
-- (For): like fenced_acquire.lua, it raises the node's longest TTL in use,
-- which Repair waits out.
--
-- It also renews the name's committed token H for the retention (never
-- shortening it): H is the hold's own token while the hold lives, and a
-- hold kept extended past the retention must still show it (Inspect,
-- Resume, an election's Leader).
--
--   KEYS[1] lock key   KEYS[2] the node's id marker
--   KEYS[3] the longest TTL used on this node (read by Repair)
--   KEYS[4] the name's H
--   ARGV[1] value      ARGV[2] TTL in ms    ARGV[3] the retention, ms
--
-- Returns {1 if extended, else 0; the node's id, -1 for none}.
local id = tonumber(redis.call('GET', KEYS[2]) or '-1')
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  if tonumber(redis.call('GET', KEYS[3]) or '0') < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[3], ARGV[2])
  end
  redis.call('PEXPIRE', KEYS[4], ARGV[3], 'GT') -- GT: never shorter, nor onto a key without a TTL
  return {redis.call('PEXPIRE', KEYS[1], ARGV[2]), id}
end
return {0, id}
