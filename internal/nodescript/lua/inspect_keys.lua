-- Prelude of the family's Inspect scripts (inspect_family.go): read-only
-- looks at lock keys and waiting lines. Nothing here writes; the scripts
-- that include it carry the no-writes flag.

-- nowMs is the node's clock in ms.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- wrongTypeOf raises the error that names a key of another type than
-- the one the library keeps there.
local function wrongTypeOf(key, want)
  error({err = 'WRONGTYPE key ' .. key .. ' holds a ' .. redis.call('TYPE', key)['ok'] .. ', not a ' .. want})
end

-- readString is GET of a key the library keeps a string in.
local function readString(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then wrongTypeOf(key, 'string') end
  return v
end

-- lockAt appends to out what one node holds of a lock key: its value or
-- '', its PTTL in ms (-2: no key), and H or '0' (hkey nil: unfenced).
local function lockAt(out, key, hkey)
  local v = readString(key)
  local h = '0'
  if hkey then h = readString(hkey) or '0' end
  out[#out + 1] = v or ''
  out[#out + 1] = redis.call('PTTL', key)
  out[#out + 1] = h
end

-- liveWaiters counts the live places of a waiting line, from its SEEN set
-- (member -> until when it counts as live, ms); '~life', the readers' own
-- mark (watch.lua), is no waiter.
local function liveWaiters(seen, now)
  local n = redis.pcall('ZCOUNT', seen, now, '+inf')
  if type(n) == 'table' then wrongTypeOf(seen, 'sorted set') end
  local life = redis.call('ZSCORE', seen, '~life')
  if life and tonumber(life) >= now then n = n - 1 end
  return n
end
