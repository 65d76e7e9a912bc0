-- Prelude of the read-write lock's scripts: the phase-fair rule's state on
-- one node (docs/rwlock.md, Fairness). Reader phases and writer phases
-- alternate. A reader refused while a writer holds, is promised or waits
-- registers once in RWAIT with the phase it was refused in; every writer's
-- Unlock ends a writer phase (RPHASE + 1). A reader whose phase is below
-- RPHASE belongs to the reader phase that Unlock began: it is admitted
-- ahead of the queued writers, and no writer is promised or granted the
-- lock while such a reader is live (RSEEN: until when, set by its own
-- client at each refusal, as a writer's liveness in the queue's SEEN).
--
-- The script including it sets RPHASE, RWAIT and RSEEN first. Nothing here
-- runs while nobody waits: an uncontended read or write touches none of
-- these keys, or one EXISTS.

local function phaseNow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- earlierReaders reports whether a live reader waits from a phase that has
-- ended. It first drops up to 64 readers whose liveness has lapsed (a
-- reader that gave up without leaving, or died); more than that stay
-- counted, which only refuses a writer until later calls drop them.
local function earlierReaders(now)
  if redis.call('EXISTS', RWAIT) == 0 then return false end
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', RSEEN, '-inf', '(' .. now, 'LIMIT', 0, 64)) do
    redis.call('ZREM', RWAIT, m)
    redis.call('ZREM', RSEEN, m)
  end
  local phase = redis.call('GET', RPHASE) or '0'
  return #redis.call('ZRANGEBYSCORE', RWAIT, '-inf', '(' .. phase, 'LIMIT', 0, 1) > 0
end

-- inEarlierPhase reports whether reader waiter was refused in a phase that
-- has ended here.
local function inEarlierPhase(waiter)
  if waiter == '' then return false end
  local p = redis.call('ZSCORE', RWAIT, waiter)
  return p and tonumber(p) < tonumber(redis.call('GET', RPHASE) or '0')
end

-- waitRead registers refused reader waiter with the current phase (kept if
-- it was registered already) and renews its liveness by stale ms. The
-- three keys live four times as long as the longest-lived reader, and
-- always together, so that RPHASE never outlives the phases in RWAIT by
-- less (a reset RPHASE would put them all in a later phase).
local function waitRead(waiter, now, stale)
  if waiter == '' then return end
  redis.call('SET', RPHASE, '0', 'NX')
  redis.call('ZADD', RWAIT, 'NX', redis.call('GET', RPHASE), waiter)
  redis.call('ZADD', RSEEN, now + tonumber(stale), waiter)
  local last = redis.call('ZRANGE', RSEEN, -1, -1, 'WITHSCORES')
  local life = math.max(1, 4 * (tonumber(last[2]) - now))
  redis.call('PEXPIRE', RPHASE, life)
  redis.call('PEXPIRE', RWAIT, life)
  redis.call('PEXPIRE', RSEEN, life)
end

-- leaveRead takes reader waiter out of the readers' wait.
local function leaveRead(waiter)
  if waiter == '' then return end
  redis.call('ZREM', RWAIT, waiter)
  redis.call('ZREM', RSEEN, waiter)
end

-- endWriterPhase is a writer's Unlock on this node, while readers wait:
-- the phase they wait in ends. It reports whether a live reader now waits
-- from an ended phase (then no writer may be promised the lock).
local function endWriterPhase(now)
  if redis.call('EXISTS', RWAIT) == 0 then return false end
  if redis.call('INCR', RPHASE) == 1 or redis.call('PTTL', RPHASE) < 0 then
    redis.call('PEXPIRE', RPHASE, math.max(1, redis.call('PTTL', RWAIT)))
  end
  return earlierReaders(now)
end
