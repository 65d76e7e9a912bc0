-- Extend of a multi-lock: every member or none. Members are set and
-- extended together, with one TTL, so on one node they expire together; a
-- member that no longer holds the value (a key deleted by hand, say) makes
-- the node refuse the whole set.
--
--   KEYS[1] the node's id marker (fenced; unfenced: KEYS[1] is a member)
--   KEYS[2] the longest TTL used on this node (fenced)
--   KEYS[first..] the members' lock keys
--   ARGV[1] value   ARGV[2] TTL in ms   ARGV[3] 1 fenced, 0 not
--
-- Returns 1 or 0 unfenced; fenced, {1 or 0, the node's id, -1 for none} and
-- the node's longest TTL in use raised to the TTL, as lua/fenced_extend.lua.
local fenced = ARGV[3] == '1'
local first = 1
if fenced then first = 3 end
local held = 1
for k = first, #KEYS do
  if redis.pcall('GET', KEYS[k]) ~= ARGV[1] then
    held = 0
    break
  end
end
if held == 1 then
  for k = first, #KEYS do redis.call('PEXPIRE', KEYS[k], ARGV[2]) end
end
if not fenced then return held end
if held == 1 and tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return {held, tonumber(redis.call('GET', KEYS[1]) or '-1')}
