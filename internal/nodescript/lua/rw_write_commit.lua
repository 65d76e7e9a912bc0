-- Prelude of a fenced write's commit (before commit.lua): a writer's token
-- must exceed every reader's committed before it, so the commit aborts
-- where the readers' mark HR (KEYS[8]) is above T.
if (redis.call('GET', KEYS[7]) or '') ~= ARGV[4] then return {-3, 0} end
do
  local hr = tonumber(getString(KEYS[8]) or '0')
  if hr > tonumber(ARGV[1]) then return {hr, ID} end
end
