-- Prelude of the family's Inspect scripts (inspect_family.go): read-only
-- looks at lock keys and waiting lines. Nothing here writes; the scripts
-- that include it carry the no-writes flag.

-- nowMs is the node's clock in ms.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- lockAt appends to out what one node holds of a lock key: its value or
-- '', its PTTL in ms (-2: no key), and H or '0' (hkey nil: unfenced).
local function lockAt(out, key, hkey)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    error({err = 'WRONGTYPE key ' .. key .. ' holds a ' .. redis.call('TYPE', key)['ok'] .. ', not a string'})
  end
  local h = '0'
  if hkey then
    local got = redis.pcall('GET', hkey)
    if type(got) == 'string' then h = got end
  end
  out[#out + 1] = v or ''
  out[#out + 1] = redis.call('PTTL', key)
  out[#out + 1] = h
end

-- liveWaiters counts the live places of a waiting line, from its SEEN set
-- (member -> until when it counts as live, ms); '~life', the readers' own
-- mark (watch.lua), is no waiter.
local function liveWaiters(seen, now)
  local n = redis.pcall('ZCOUNT', seen, now, '+inf')
  if type(n) == 'table' then return 0 end
  local life = redis.call('ZSCORE', seen, '~life')
  if life and tonumber(life) >= now then n = n - 1 end
  return n
end
