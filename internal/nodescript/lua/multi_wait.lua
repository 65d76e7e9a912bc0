-- takeSet of a multi-lock's acquisition (multi_fenced_acquire.lua, or
-- returned as it is): every member or none (multi_take.lua). A refused
-- set joins every member's queue as one waiter (WAITER, one place on each;
-- a TryLockMulti passes none, nor the queues' keys), so that the members' releases promise them
-- to it in its turn, as to a waiting Lock, and marks every member's queue
-- (watch.lua), so that a release that promises a member to nobody wakes
-- it too. The script that includes it sets MEMBERS, STRIDE and QOFF, the
-- offset of a member's QUEUE among its keys (its SEEN follows), and WAITER.
local function takeSet()
  local ok = takeAll(MEMBERS, STRIDE)
  if (ok == 0 or ok == 2) and WAITER ~= '' then
    for k = MEMBERS, #KEYS, STRIDE do
      watch(KEYS[k + QOFF], ARGV[4])
      enqueueOn(KEYS[k + QOFF], KEYS[k + QOFF + 1])
    end
  end
  return ok
end
