-- InspectMulti: what one node holds of several lock names (a multi-lock's
-- members, a semaphore's slots), read only.
--
--   KEYS per name: its lock key, then (fenced, ARGV[1] = 2) its H
--   ARGV[1] how many keys per name: 1 or 2
--
-- Returns, per name, three entries as inspect.lua's reply.
local stride = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS, stride do
  lockAt(out, KEYS[i], stride == 2 and KEYS[i + 1] or nil)
end
return out
