-- The waiting line shared by the acquisition scripts (queueLua in
-- queue.go). The script that includes it sets NEXT, QUEUE, SEEN and WAITER
-- first, and passes STALE (ms) and WAITED (us) as ARGV[4] and ARGV[5]: they are
-- converted only when a waiter joins, as every conversion at the top of a
-- script is paid by every call (a sixth of an uncontended acquisition).
local function promisedToOther()
  local n = redis.call('GET', NEXT)
  return n and n ~= WAITER
end
-- enqueueOn puts WAITER in the queue of places queue, with its liveness in
-- seen: enqueue for the script's own lock, or each member of a multi-lock.
local function enqueueOn(queue, seen)
  if WAITER == '' then return end
  local stale, waited = tonumber(ARGV[4]), math.max(0, tonumber(ARGV[5]) or 0)
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- Places in microseconds: waiters of a busy lock join a millisecond or
  -- less apart, and in milliseconds their places tied or crossed the
  -- millisecond boundary differently on different nodes, so that releases
  -- split their promises between them.
  local place = us - waited
  local had = redis.call('ZSCORE', queue, WAITER)
  if not had or tonumber(had) > place then redis.call('ZADD', queue, place, WAITER) end
  -- SEEN holds when the waiter stops counting as live (ms): its own
  -- client's STALE decides, not the releaser's, whose retry delay may be
  -- far shorter than this waiter's sleeps.
  local ms = math.floor(us / 1000)
  redis.call('ZADD', seen, ms + stale, WAITER)
  -- The line lives four times as long as its longest-lived waiter, so that
  -- a joiner with a short STALE does not expire the waiters that sleep
  -- longer. (PTTL or PEXPIRE GT would need another ACL command, or 7.0.)
  local last = redis.call('ZRANGE', seen, -1, -1, 'WITHSCORES')
  local life = 4 * (tonumber(last[2]) - ms)
  redis.call('PEXPIRE', queue, life)
  redis.call('PEXPIRE', seen, life)
end
local function enqueue() enqueueOn(QUEUE, SEEN) end
