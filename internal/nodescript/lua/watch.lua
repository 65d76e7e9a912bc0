-- Prelude of the acquisitions whose callers do not queue but listen (a
-- reader refused by a writer, a multi-lock refused by a member): watch
-- marks a lock's queue q so that the lock's next release tells every such
-- listener, on '<lock key>:released'. The mark is a member of the queue
-- that no waiter has, at its end ('+inf'), without liveness: the release
-- drops it as dead when it reaches it, after every live queued waiter, and
-- then, with nobody to promise the lock to, publishes (release.lua). Only
-- writers and Lock calls are promised the lock.
--
-- The mark lasts life ms at least. Its lifetime is kept in the queue's
-- SEEN as '~life', which no waiter has either and release.lua never looks
-- up (it looks up '~'), so that a waiter that joins later and sets the
-- queue's lifetime from the longest-lived entry of SEEN (queue.lua) does
-- not cut the mark short. Scripts that read SEEN as the live waiters skip
-- it (rw_read.lua).
local function watch(q, seen, life)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', q, '+inf', '~')
  redis.call('ZADD', seen, now + tonumber(life), '~life')
  if redis.call('PTTL', q) < tonumber(life) then redis.call('PEXPIRE', q, life) end
  if redis.call('PTTL', seen) < tonumber(life) then redis.call('PEXPIRE', seen, life) end
end
