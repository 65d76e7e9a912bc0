-- Round 1 of a semaphore's acquisition of n permits, fenced or not: takeSet
-- checks the semaphore's size (permits.lua), then its line (sem_line.lua),
-- then takes every one of the n slots the client chose, or none
-- (multi_take.lua), as a multi-lock over the slots' names.
--
-- The script that includes it sets PERMITS (the size key's index in KEYS),
-- MEMBERS and STRIDE (where the chosen slots' keys begin in KEYS, and how
-- many each has: lock key, release marker, promise NEXT[, H]), and the
-- line's globals (sem_line.lua, queue.lua). ARGV[4] and ARGV[5] are the
-- queue's STALE and WAITED, ARGV[7] K, ARGV[8] the size's lifetime, ARGV[9]
-- the version of the client's size.
--
-- Returns 1 or 0 as multi_take.lua does, and 2 when the chosen slots are
-- free here but waiters ahead in the line have them (as the mutex's 2:
-- free but promised). A waiter that is refused joins the line, or keeps
-- its place; one granted here leaves it.
local function takeSet()
  local bad = checkPermits(KEYS[PERMITS], ARGV[7], ARGV[9], ARGV[8])
  if bad then return bad end
  local n = (#KEYS - MEMBERS + 1) / STRIDE
  if lineAhead(n, tonumber(ARGV[7]), tonumber(ARGV[5]) or 0) then
    enqueue()
    for k = MEMBERS, #KEYS, STRIDE do
      local v = redis.pcall('GET', KEYS[k])
      if type(v) == 'table' and v.err then return wrongType(KEYS[k]) end
      if v or redis.call('EXISTS', KEYS[k + 1]) == 1 then return 0 end
    end
    return 2
  end
  local ok = takeAll(MEMBERS, STRIDE)
  if ok == 1 then
    leaveLine()
  elseif type(ok) ~= 'table' then
    enqueue()
  end
  return ok
end
