-- Prelude of the fenced scripts: a key that holds another type than the
-- string a script keeps there (a key-name clash) is refused with an error
-- that names it, 'WRONGTYPE key <key> holds a <type>, not a string', which
-- the client reports as a WrongTypeError. A command's own WRONGTYPE would
-- name no key.
local function wrongType(k)
  return {err = 'WRONGTYPE key ' .. k .. ' holds a ' .. redis.call('TYPE', k)['ok'] .. ', not a string'}
end
local function getString(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'table' and v.err then error(wrongType(k)) end
  return v
end
