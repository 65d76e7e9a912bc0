-- Prelude of a read-write lock's write acquisition, before the mutex's
-- acquisition body (acquire.lua, fenced_acquire.lua): a write is granted
-- only where no reader holds the lock. Reader entries that have expired by
-- the node's clock are purged first; while a live one remains, the writer is
-- refused and joins the queue, where it blocks new readers (rw_read.lua), so
-- that readers who keep overlapping cannot starve it. Nor is it granted
-- while a reader waits whose writer hold has ended (rw_phase.lua); a write
-- it grants counts as the next writer hold while readers wait.
--
-- The script including it sets READERS (the readers' sorted set: reader
-- value -> expiry in ms on this node's clock), RPHASE, RWAIT, RSEEN and
-- FENCED first; fenced, the
-- identity checks run before the refusal, as the body's own would.
do
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local purged = redis.pcall('ZREMRANGEBYSCORE', READERS, '-inf', now)
  if type(purged) == 'table' and purged.err then return wrongType(READERS) end
  -- A live reader holds the lock, or one waits whose writer hold has ended
  -- (rw_phase.lua): that reader phase comes first, unless this writer was
  -- promised the lock (a reader whose liveness had lapsed when the promise
  -- was made waits for the next phase).
  local waiting = redis.call('EXISTS', RWAIT) == 1
  if waiting then
    local clash = phaseKeyClash()
    if clash then return wrongType(clash) end
  end
  local promised = waiting and WAITER ~= '' and redis.call('GET', NEXT) == WAITER
  if redis.call('ZCARD', READERS) > 0 or (waiting and not promised and admittedReaders(now)) then
    local refused = 0
    if FENCED then
      local id = nodeID()
      if not id then
        if redis.call('EXISTS', ROSTERKEY) == 0 then return {-2, 0} end
        return {-1, 0}
      end
      if (redis.call('GET', ROSTERKEY) or '') ~= ROSTER then return {-3, 0} end
      refused = {0, 0}
    end
    -- A copy of a call that was rolled back (its marker is here) must not
    -- queue its waiter again: it gave up.
    if redis.call('EXISTS', KEYS[2]) == 0 then enqueue() end
    return refused
  end
  -- The body grants the write where the key is free, this
  -- value was not released here and no other waiter is promised it: that
  -- hold is the phase the readers refused from now on wait for.
  if waiting and not redis.pcall('GET', KEYS[1]) and redis.call('EXISTS', KEYS[2]) == 0 and
      (promised or redis.call('EXISTS', NEXT) == 0) then
    nextPhase()
  end
end
