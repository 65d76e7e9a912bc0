-- Prelude of a semaphore's acquisitions and releases: its waiting line, one
-- per semaphore (not per slot), so that permits go to waiters in arrival
-- order whichever slot is freed. The line is the mutex's queue (queue.lua:
-- QUEUE of places, SEEN of liveness) under the semaphore's line key; a
-- waiter's id ends in '*<n>', the number of permits it asks for.
--
-- The rule, on each node: a request for n permits may take slots only if
-- the live waiters ahead of it in the line, with its own n, ask for no
-- more than the slots free on this node. A request that does not wait
-- (TryAcquire) counts every waiter as ahead of it. So a request for many
-- permits at the head of the line holds back the single ones behind it
-- until enough slots are free: it does not starve.
--
-- The script that includes it sets QUEUE, SEEN, WAITER and SLOTS (the index
-- in KEYS of the first of the semaphore's K slot keys, K being ARGV[K]).

-- wantOf is how many permits a waiter in the line asks for.
local function wantOf(member)
  return tonumber(string.match(member, '%*(%d+)$')) or 1
end

local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- freeSlots is how many of the K slots nobody holds on this node; it drops
-- the waiters that no longer count as live first (at most 64 a call).
local function freeSlots(k, now)
  local stale = redis.call('ZRANGEBYSCORE', SEEN, '-inf', '(' .. now, 'LIMIT', 0, 64)
  if #stale > 0 then
    redis.call('ZREM', QUEUE, unpack(stale))
    redis.call('ZREM', SEEN, unpack(stale))
  end
  return k - redis.call('EXISTS', unpack(KEYS, SLOTS, SLOTS + k - 1))
end

-- lineHead returns up to n waiters from the head of the line, in order,
-- dropping on the way those that ask for more than the K slots (clients
-- built with a larger size, since SetPermits shrank it: they can never be
-- served, and would hold back everyone behind them), 64 a call at most.
local function lineHead(k, n)
  local out, dropped = {}, 0
  while #out < n and dropped < 64 do
    local page = redis.call('ZRANGE', QUEUE, #out, n - 1)
    if #page == 0 then break end
    for _, m in ipairs(page) do
      if wantOf(m) > k then
        redis.call('ZREM', QUEUE, m)
        redis.call('ZREM', SEEN, m)
        dropped = dropped + 1
      else
        out[#out + 1] = m
      end
    end
  end
  return out
end

-- lineAhead reports that waiters ahead of this request for n permits keep
-- it from taking slots here; waitedUs is how long its waiter has waited
-- (its place, if the line does not hold it: a place is kept across
-- attempts, and a grant here takes the waiter out of the line).
local function lineAhead(n, k, waitedUs)
  if redis.call('EXISTS', QUEUE) == 0 then return false end
  -- A key of another type under the line's names (an application's key)
  -- is named, not met as a bare WRONGTYPE inside the script (the
  -- acquisition scripts include the wrongType prelude).
  for _, key in ipairs({QUEUE, SEEN}) do
    local t = redis.call('TYPE', key)['ok']
    if t ~= 'none' and t ~= 'zset' then error(wrongType(key)) end
  end
  local now = nowMs()
  local budget = freeSlots(k, now) - n
  if budget < 0 then return true end
  local mine = math.huge
  if WAITER ~= '' then
    local t = redis.call('TIME')
    mine = tonumber(redis.call('ZSCORE', QUEUE, WAITER) or
      (tonumber(t[1]) * 1000000 + tonumber(t[2]) - math.max(0, waitedUs)))
  end
  -- Each waiter asks for one permit at least: budget + 1 of them ahead
  -- are more than the free slots can serve.
  for _, m in ipairs(lineHead(k, budget + 1)) do
    if m == WAITER or tonumber(redis.call('ZSCORE', QUEUE, m)) >= mine then return false end
    budget = budget - wantOf(m)
    if budget < 0 then return true end
  end
  return false
end

local function leaveLine()
  if WAITER == '' then return end
  redis.call('ZREM', QUEUE, WAITER)
  redis.call('ZREM', SEEN, WAITER)
end

-- wakeLine tells the waiters at the head of the line whose requests the
-- free slots can serve, in order, up to the first that they cannot: each
-- on its own client's channel ('<line>:promised:<client>'), as the mutex's
-- release promises its lock. A waiter told counts as live no longer than
-- promiseMs from now unless it tries again, so that a dead one holds the
-- line back for a promise period, not for its retry delay (the waiters
-- behind it find the slots at their next attempt, as the mutex's do after
-- a promise nobody took).
local function wakeLine(k, line, promiseMs)
  if redis.call('EXISTS', QUEUE) == 0 then return end
  local now = nowMs()
  local budget = freeSlots(k, now)
  if budget <= 0 then return end
  local until_ = now + tonumber(promiseMs)
  for _, m in ipairs(lineHead(k, budget)) do
    budget = budget - wantOf(m)
    if budget < 0 then return end
    if tonumber(redis.call('ZSCORE', SEEN, m) or '0') > until_ then
      redis.call('ZADD', SEEN, until_, m)
    end
    local client = string.match(m, '^(.*)/')
    if client then redis.pcall('PUBLISH', line .. ':promised:' .. client, m) end
  end
end
