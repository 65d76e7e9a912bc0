-- Prelude of the fenced scripts: is this node's fencing state intact?
--
-- The node counts only while it holds its id marker and serves under the
-- replication id recorded when it got that id. A node restarted without its
-- data has no marker; a replica promoted in a failover, or a restarted
-- master, serves under a new replication id and may lack the last writes
-- (replication and AOF everysec are asynchronous). Either way its counters
-- cannot be trusted until Repair raises them. The first time it is found so,
-- the node stamps LOST with '<its own time in ms>:<nonce>:<replication id>',
-- which starts the delayed restart that Repair waits out. The nonce (the
-- caller's random lock value, or a reader's fresh one) makes every episode's
-- stamp unique: a wipe removes the stamp, the next script stamps anew, and a
-- repair that read the old stamp no longer finds it (repair.lua).
--
-- The script defining it sets IDKEY, REPLIDKEY, LOSTKEY and NONCE first.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function nodeID()
  local id = redis.call('GET', IDKEY)
  local info = redis.call('INFO', 'replication')
  local want = id and redis.call('GET', REPLIDKEY)
  -- The common case is a plain search for the recorded id: matching a
  -- pattern against the INFO text cost about a fifth of a fenced script.
  if want and string.find(info, 'master_replid:' .. want .. '\r', 1, true) then
    return tonumber(id)
  end
  local replid = string.match(info, 'master_replid:(%x+)')
  if id and not want then
    -- Provisioned before replication ids were recorded: trust on first use.
    redis.pcall('SET', REPLIDKEY, replid)
    return tonumber(id)
  end
  -- The stamp names the replication id it was made under: one left by an
  -- earlier episode (it replicated to a replica since promoted, say) does
  -- not date this one.
  local stamp = redis.call('GET', LOSTKEY)
  if not stamp or string.sub(stamp, -string.len(replid) - 1) ~= ':' .. replid then
    -- pcall: a read-only replica (doctor reads one) cannot be stamped.
    redis.pcall('SET', LOSTKEY, nowMs() .. ':' .. NONCE .. ':' .. replid)
  end
  return nil
end
