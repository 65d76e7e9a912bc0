#!lua flags=no-writes
-- Inspect (inspect.go): what one node holds of a lock name. It writes
-- nothing, and says so (the no-writes flag, Redis 7.0 and later): the node
-- then checks its keys against the user as reads, runs it on a read-only
-- replica, and while the node is out of memory.
--
--   KEYS[1] lock key   KEYS[2] H of the name (fenced clients only)
--
-- Returns {value or '', PTTL of the lock key in ms (-2: no key), H or '0'}.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then
  return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. redis.call('TYPE', KEYS[1])['ok'] .. ', not a string')
end
local h = '0'
if #KEYS > 1 then
  local got = redis.pcall('GET', KEYS[2])
  if type(got) == 'string' then h = got end
end
return {v or '', redis.call('PTTL', KEYS[1]), h}
