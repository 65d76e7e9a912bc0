-- Prelude of the multi-lock's acquisitions: takeAll sets every member's lock
-- key to ARGV[1] for ARGV[2] ms, or none of them. The members' keys are
-- KEYS[first], KEYS[first + stride], ...; after each lock key come its
-- release marker of this value and its promise NEXT (the mutex's queue).
--
-- Returns 1 if every member now holds the value, 0 if one is held by another
-- owner (or this value was already released here), 2 if no member is held
-- but one is promised to another waiter than WAITER (the script's global:
-- a waiting multi-lock's id in its members' queues, '' for none), and a
-- WRONGTYPE error that names the key if any member holds another type,
-- whatever the others.
-- Nothing is written unless every member can be taken: a request never holds
-- part of its set on a node, so two multi-locks cannot hold-and-wait.
local function takeAll(first, stride)
  -- Every member is looked at before a refusal: a key of another type must
  -- not hide behind a held member (it is an error no retry fixes).
  local refused, promised = false, false
  for k = first, #KEYS, stride do
    local v = redis.pcall('GET', KEYS[k])
    if type(v) == 'table' and v.err then return wrongType(KEYS[k]) end
    if redis.call('EXISTS', KEYS[k + 1]) == 1 or (v and v ~= ARGV[1]) then
      refused = true
    elseif not v then
      local next = redis.call('GET', KEYS[k + 2])
      if next and next ~= WAITER then promised = true end
    end
  end
  if refused then return 0 end
  if promised then return 2 end
  for k = first, #KEYS, stride do
    redis.call('SET', KEYS[k], ARGV[1], 'NX', 'PX', ARGV[2])
  end
  return 1
end
