-- Release of a read-write lock, either side (release.lua runs unchanged as
-- releaseOne on the writer's keys). A reader leaves its own entry and the
-- readers' wait; the last live reader to leave hands the lock to the first
-- queued writer, as a writer's Unlock does, unless a reader still waits
-- whose writer hold has ended (rw_phase.lua): the reader phase now running
-- is that reader's too. A writer's Unlock ends its hold: while readers
-- wait for it, it promises the lock to no writer and wakes them instead;
-- where it finds no key (it never held the lock here, or its hold expired)
-- it counts as a hold that ended, once. A rollback, and a writer's release
-- with nobody waiting to read, are release.lua's, release marker included.
--
--   KEYS[1..5] the writer's key, release marker, NEXT, QUEUE, SEEN
--   KEYS[6] READERS   KEYS[7..9] RPHASE, RWAIT, RSEEN
--   ARGV[1..5]: release.lua's   ARGV[6] 1 for a write lease, 0 for a read
local was = redis.pcall('ZREM', KEYS[6], ARGV[1])
local announce = ARGV[3] == '1'
-- A reader's Unlock leaves the readers' wait even where its entry is gone.
if announce and ARGV[6] == '0' then leaveRead(ARGV[4]) end
local function wakeReaders(deleted)
  redis.pcall('PUBLISH', KEYS[1] .. ':released', '')
  return deleted
end
-- A reader's Unlock goes this way even where its entry is gone (expired):
-- the writer's path below would promise the lock to a writer in the middle
-- of a reader phase.
if was == 1 or (was == 0 and announce and ARGV[6] == '0') then
  -- A reader's Unlock that finds no entry here, unsure the node has its
  -- read call (ARGV[2] not 0), leaves the value's release marker, as the
  -- mutex's release does: the read call still on its way must not land
  -- after it and register a reader that nobody holds, keeping writers out
  -- for a TTL.
  if was == 0 and ARGV[2] ~= '0' then
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
  end
  -- A reader that waited as a writer (then downgraded) leaves the queue
  -- here too, whatever other readers remain.
  if announce and ARGV[4] ~= '' then
    redis.call('ZREM', KEYS[4], ARGV[4])
    redis.call('ZREM', KEYS[5], ARGV[4])
  end
  -- The set goes with its last entry: when it is gone (the last reader
  -- out, the common case) one call tells it.
  local now
  local empty = redis.call('EXISTS', KEYS[6]) == 0
  if not empty then
    now = phaseNow()
    redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
    empty = redis.call('ZCARD', KEYS[6]) == 0
  end
  if empty then
    if announce and admittedReaders(now) then return wakeReaders(was) end
    releaseOne({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]}, {ARGV[1], '0', ARGV[3], ARGV[4], ARGV[5]})
  end
  return was
end
if announce and ARGV[6] == '1' and redis.call('EXISTS', RWAIT) == 1 and not phaseKeyClash() then
  local v = redis.pcall('GET', KEYS[1])
  if type(v) ~= 'table' and (v == ARGV[1] or not v) then
    if not v then
      -- Once per node: the release marker it leaves keeps a resent copy
      -- from counting a second hold.
      if redis.call('EXISTS', KEYS[2]) == 1 then return releaseOne({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]}, ARGV) end
      nextPhase()
      redis.call('SET', KEYS[2], '1', 'PX', math.max(tonumber(ARGV[2]), tonumber(ARGV[5])))
    end
    if admittedReaders(phaseNow()) then
      local deleted = 0
      if v then
        redis.call('DEL', KEYS[1])
        deleted = 1
      end
      if ARGV[4] ~= '' then
        redis.call('ZREM', KEYS[4], ARGV[4])
        redis.call('ZREM', KEYS[5], ARGV[4])
      end
      redis.call('DEL', KEYS[3]) -- no writer is promised the lock
      return wakeReaders(deleted)
    end
  end
end
return releaseOne({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]}, ARGV)
