-- Extend of a multi-lock: every member or none. Members are set and
-- extended together, with one TTL, so on one node they expire together; a
-- member that no longer holds the value (a key deleted by hand, say) makes
-- the node refuse the whole set.
--
--   KEYS[1] the node's id marker (fenced; unfenced: KEYS[1] is a member)
--   KEYS[2] the longest TTL used on this node (fenced)
--   KEYS[first..last] the members' lock keys, then (fenced) their H, in
--   the same order
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] 1 fenced, 0 not
--   ARGV[4] the retention, ms (fenced)
--
-- Returns 1 or 0 unfenced; fenced, {1 or 0, the node's id, -1 for none} and
-- the node's longest TTL in use raised to the TTL, and each member's H
-- renewed for the retention, as lua/fenced_extend.lua.
local fenced = ARGV[3] == '1'
local first, last = 1, #KEYS
if fenced then first, last = 3, 2 + (#KEYS - 2) / 2 end
local held = 1
for k = first, last do
  if redis.pcall('GET', KEYS[k]) ~= ARGV[1] then
    held = 0
    break
  end
end
if held == 1 then
  for k = first, last do redis.call('PEXPIRE', KEYS[k], ARGV[2]) end
  for k = last + 1, #KEYS do redis.call('PEXPIRE', KEYS[k], ARGV[4], 'GT') end
end
if not fenced then return held end
if held == 1 and tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return {held, tonumber(redis.call('GET', KEYS[1]) or '-1')}
