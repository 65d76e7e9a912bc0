-- Prelude of the acquisitions whose callers do not queue but listen (a
-- reader refused by a writer, a multi-lock refused by a member): watch
-- marks a lock's queue q so that the lock's next release tells every such
-- listener, on '<lock key>:released'. The mark is a member of the queue
-- that no waiter has, at its end ('+inf'), without liveness: the release
-- drops it as dead when it reaches it, after every live queued waiter, and
-- then, with nobody to promise the lock to, publishes (release.lua). Only
-- writers and Lock calls are promised the lock. The mark lasts life ms at
-- least.
local function watch(q, life)
  redis.call('ZADD', q, '+inf', '~')
  if redis.call('PTTL', q) < tonumber(life) then redis.call('PEXPIRE', q, life) end
end
