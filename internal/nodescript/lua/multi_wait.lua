-- takeSet of a multi-lock's acquisition (multi_fenced_acquire.lua, or
-- returned as it is): every member or none (multi_take.lua). A refused
-- set joins every member's queue as one waiter (WAITER, one place on each;
-- a TryLockMulti passes none, nor the queues' keys), so that the members' releases promise them
-- to it in its turn, as to a waiting Lock, and marks every member's queue
-- (watch.lua), so that a release that promises a member to nobody wakes
-- it too. A member promised to it here that it cannot use now (another
-- member is held) it passes on at once (until it has waited a TTL:
-- keepsPromises) to the member's next live waiter after it,
-- as a release would (release.lua), so that the member's other waiters do
-- not wait for the promise to lapse, nor lose their turn to whoever
-- comes. The script that includes it sets MEMBERS, STRIDE and QOFF, the
-- offset of a member's QUEUE among its keys (its SEEN follows), and
-- WAITER; ARGV[7] is how long a promise lasts at least, in ms.
local function passOn(key, next, queue, seen)
  -- The rest of the promise goes with it, a promise period at least.
  local life = math.max(redis.call('PTTL', next), tonumber(ARGV[7]))
  redis.call('DEL', next)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- Only to a waiter after this one: a waiter ahead of it has had its turn
  -- (or passed it on too), and two waiting multi-locks would otherwise pass
  -- a member back and forth for as long as their other members are held.
  local mine = redis.call('ZSCORE', queue, WAITER)
  local after = {}
  if mine then after = redis.call('ZRANGEBYSCORE', queue, '(' .. mine, '+inf', 'LIMIT', 0, 16) end
  for _, m in ipairs(after) do
    local live = tonumber(redis.call('ZSCORE', seen, m) or '0')
    if now <= live then
      redis.call('SET', next, m, 'PX', life)
      local promised = now + life
      if live > promised then redis.call('ZADD', seen, promised, m) end
      local client = string.match(m, '^(.*)/')
      if client then
        redis.pcall('PUBLISH', key .. ':promised:' .. client, m)
      else
        redis.pcall('PUBLISH', key .. ':released', m)
      end
      return
    end
  end
  redis.pcall('PUBLISH', key .. ':released', '')
end
-- keepsPromises: a waiting multi-lock that has waited a TTL (ARGV[2]) on
-- this node keeps the members promised to it instead of passing them on,
-- so that two members held in overlapping turns by other waiters cannot
-- starve it for ever: once a member is promised to it, that member waits
-- for it, and the others come to it in their queues' order (issue 34).
-- Before that it passes them on, so that a set waiting for a long hold
-- does not idle its other members; the members' other waiters then keep
-- their arrival order.
--
-- It keeps them only if no other member of its set is promised to an older
-- waiter (a lower place in that member's queue; an unknown place counts as
-- older): the older is served first. So no two waiting multi-locks can each
-- keep a member the other waits for: around any cycle of such waits each
-- keeper would be older than the next, which a cycle cannot be. Holders
-- never wait, and a promise to a waiter that does not come back lapses
-- after STALE (ARGV[4]), the longest a live waiter sleeps between attempts.
local function keepsPromises()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local first = tonumber(redis.call('ZSCORE', KEYS[MEMBERS + QOFF], WAITER) or now)
  if now - first < tonumber(ARGV[2]) * 1000 then return false end
  for k = MEMBERS, #KEYS, STRIDE do
    local next = redis.call('GET', KEYS[k + 2])
    if next and next ~= WAITER then
      local theirs = redis.call('ZSCORE', KEYS[k + QOFF], next)
      local mine = redis.call('ZSCORE', KEYS[k + QOFF], WAITER)
      if not theirs or not mine or tonumber(theirs) <= tonumber(mine) then return false end
    end
  end
  return true
end
local function takeSet()
  local ok = takeAll(MEMBERS, STRIDE)
  if (ok == 0 or ok == 2) and WAITER ~= '' then
    for k = MEMBERS, #KEYS, STRIDE do
      watch(KEYS[k + QOFF], KEYS[k + QOFF + 1], ARGV[4])
      enqueueOn(KEYS[k + QOFF], KEYS[k + QOFF + 1])
    end
    local keep = nil -- asked once, after the set joined every queue
    for k = MEMBERS, #KEYS, STRIDE do
      if redis.call('GET', KEYS[k + 2]) == WAITER then
        if keep == nil then keep = keepsPromises() end
        if keep then
          if redis.call('PTTL', KEYS[k + 2]) < tonumber(ARGV[4]) then
            redis.call('PEXPIRE', KEYS[k + 2], ARGV[4])
          end
        else
          passOn(KEYS[k], KEYS[k + 2], KEYS[k + QOFF], KEYS[k + QOFF + 1])
        end
      end
    end
  end
  return ok
end
