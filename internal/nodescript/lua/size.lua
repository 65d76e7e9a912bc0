-- Prelude of the scripts that read a semaphore's size (docs/semaphore.md,
-- "The size and its version"): the size key holds 'K' (version 0: a size no
-- SetPermits has written, as before versions) or 'K:v', K permits at
-- version v. A higher version is a later SetPermits.
local function parseSize(s)
  if not s then return nil, nil end
  local k, v = string.match(s, '^(%d+):(%d+)$')
  if k then return tonumber(k), tonumber(v) end
  return tonumber(s), 0
end
local function encodeSize(k, v)
  if v == 0 then return tostring(k) end
  return k .. ':' .. v
end
